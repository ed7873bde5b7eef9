#!/usr/bin/env bash
# A MongoDB-wire server on loopback for the MongoDB store's integration tests.
#
#   deploy/ferretdb.sh start   build FerretDB when missing (once; cached), start it, wait until it accepts
#                              connections, print a connection string (export TEST_MONGO_URI=...)
#   deploy/ferretdb.sh stop    stop it and delete its data
#
# No MongoDB server can be installed on these machines (no Debian package, no download site reachable).
# FerretDB (Apache-2.0, Go) speaks MongoDB's wire protocol over an embedded SQLite directory, so the store
# runs its conformance suite through the real mongo-driver against a real server process. It is not
# MongoDB: it has no change streams and no transactions (the backend needs neither), and the suite
# runs against a real MongoDB whenever TEST_MONGO_URI points at one instead.
#
# FerretDB v1.24.0 is the last release with the SQLite backend. It is built from the Go module proxy
# outside this project's module into $JERVIS_CACHE (default ~/.cache/jervis-ferretdb), about a minute
# cold. Its module leaves build/version/version.txt empty, which panics at start, so the source is
# copied and the file written before the build.
set -euo pipefail

VERSION=v1.24.0
CACHE=${JERVIS_CACHE:-$HOME/.cache/jervis-ferretdb}
BIN=$CACHE/bin/ferretdb
PORT=${FERRETDB_PORT:-27117}
RUN=$CACHE/run

build() {
	if [[ -x $BIN && "$(cat "$CACHE/version" 2>/dev/null)" == "$VERSION" ]]; then
		return
	fi
	echo "building ferretdb $VERSION into $CACHE (about a minute, once)" >&2
	mkdir -p "$CACHE"
	local work
	work=$(mktemp -d)
	(
		cd "$work"
		cat >go.mod <<MOD
module ferretdb.build

go 1.26
MOD
		GOFLAGS=-mod=mod go mod download -json "github.com/FerretDB/FerretDB@$VERSION" >mod.json
		src=$(sed -n 's/^\t"Dir": "\(.*\)",$/\1/p' mod.json)
		cp -r "$src" ferret
		chmod -R u+w ferret
		echo "$VERSION" >ferret/build/version/version.txt
		go mod edit -require "github.com/FerretDB/FerretDB@$VERSION" -replace github.com/FerretDB/FerretDB=./ferret
		printf 'package main\n\nimport _ "github.com/FerretDB/FerretDB/cmd/ferretdb"\n' >tools.go
		GOFLAGS=-mod=mod go mod tidy -e >/dev/null 2>&1 || true
		GOFLAGS=-mod=mod go build -o "$BIN" github.com/FerretDB/FerretDB/cmd/ferretdb
	)
	rm -rf "$work"
	echo "$VERSION" >"$CACHE/version"
}

NAME=ferretdb
# shellcheck source=deploy/server.sh
source "$(dirname "$0")/server.sh"

start() {
	build
	server_stop >/dev/null 2>&1 || true
	local data
	data=$(server_data)
	"$BIN" --handler=sqlite --sqlite-url="file:$data/?_txlock=immediate&_pragma=synchronous(normal)" --state-dir="$data" \
		--listen-addr="127.0.0.1:$PORT" --debug-addr=127.0.0.1:0 --telemetry=disable --log-level=warn >"$RUN/server.log" 2>&1 &
	echo $! >"$RUN/pid"
	server_wait "(exec 3<>/dev/tcp/127.0.0.1/$PORT)" "mongodb://127.0.0.1:$PORT/" 60
}

server_main "$@"
