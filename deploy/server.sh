# Shared by the scripts that run a test server on loopback (weaviate.sh,
# ferretdb.sh); source it after setting RUN (the run directory: pid, data,
# log) and NAME (for messages).

# server_data makes the server's data directory and records it for stop.
server_data() {
	mkdir -p "$RUN"
	local data
	data=$(mktemp -d)
	echo "$data" >"$RUN/data"
	echo "$data"
}

# server_wait waits until READY (a command) succeeds, then prints ADDR; it
# fails with the server's log if the server exits or after TRIES half-seconds.
server_wait() {
	local ready=$1 addr=$2 tries=${3:-120}
	for _ in $(seq 1 "$tries"); do
		if eval "$ready" >/dev/null 2>&1; then
			echo "$addr"
			return
		fi
		if ! kill -0 "$(cat "$RUN/pid")" 2>/dev/null; then
			echo "$NAME exited; its log:" >&2
			tail -20 "$RUN/server.log" >&2
			return 1
		fi
		sleep 0.5
	done
	echo "$NAME not ready after $((tries / 2)) s; its log:" >&2
	tail -20 "$RUN/server.log" >&2
	return 1
}

# server_stop stops the server and deletes its data.
server_stop() {
	if [[ -f $RUN/pid ]]; then
		kill "$(cat "$RUN/pid")" 2>/dev/null || true
		for _ in $(seq 1 40); do kill -0 "$(cat "$RUN/pid")" 2>/dev/null || break; sleep 0.25; done
		kill -9 "$(cat "$RUN/pid")" 2>/dev/null || true
		rm -f "$RUN/pid"
	fi
	if [[ -f $RUN/data ]]; then
		rm -rf "$(cat "$RUN/data")" "$RUN/data"
	fi
}

# server_main runs start or stop as the script's first argument says.
server_main() {
	case ${1:-} in
	start) start ;;
	stop) server_stop ;;
	*)
		echo "usage: $0 start|stop" >&2
		exit 2
		;;
	esac
}
