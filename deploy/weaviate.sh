#!/usr/bin/env bash
# A real Weaviate server on loopback for the integration tests (ARCHITECTURE §3).
#
#   deploy/weaviate.sh start   build weaviate-server when missing (once; cached), start it, wait until ready,
#                              print its URL (export TEST_WEAVIATE_URL=...)
#   deploy/weaviate.sh stop    stop it and delete its data
#   deploy/weaviate.sh grpc    print its gRPC address (export TEST_WEAVIATE_GRPC=...)
#
# The server is built from the Go module proxy outside this project's module (the client and the server
# modules do not compile together) into $JERVIS_CACHE (default ~/.cache/jervis-weaviate), which CI reuses:
# a cold build takes 4-10 minutes, a warm start about ten seconds.
set -euo pipefail

VERSION=v1.39.3 # newer 1.39.x need a dependency the module proxy refuses
CACHE=${JERVIS_CACHE:-$HOME/.cache/jervis-weaviate}
BIN=$CACHE/bin/weaviate-server
PORT=${WEAVIATE_PORT:-18080}
GRPC=${WEAVIATE_GRPC_PORT:-18081}
RUN=$CACHE/run
URL=http://127.0.0.1:$PORT

build() {
	if [[ -x $BIN && "$(cat "$CACHE/version" 2>/dev/null)" == "$VERSION" ]]; then
		return
	fi
	echo "building weaviate-server $VERSION into $CACHE (minutes, once)" >&2
	mkdir -p "$CACHE"
	(cd "$(mktemp -d)" && GOBIN=$CACHE/bin GOFLAGS=-mod=mod go install "github.com/weaviate/weaviate/cmd/weaviate-server@$VERSION")
	echo "$VERSION" >"$CACHE/version"
}

NAME=weaviate-server
# shellcheck source=deploy/server.sh
source "$(dirname "$0")/server.sh"

start() {
	build
	server_stop >/dev/null 2>&1 || true
	local data
	data=$(server_data)
	AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED=true PERSISTENCE_DATA_PATH=$data DEFAULT_VECTORIZER_MODULE=none \
		ENABLE_MODULES= CLUSTER_HOSTNAME=node1 CLUSTER_BIND_ADDR=127.0.0.1 CLUSTER_ADVERTISE_ADDR=127.0.0.1 \
		CLUSTER_GOSSIP_BIND_PORT=$((PORT + 2)) CLUSTER_DATA_BIND_PORT=$((PORT + 3)) RAFT_PORT=$((PORT + 4)) \
		RAFT_INTERNAL_RPC_PORT=$((PORT + 5)) RAFT_BOOTSTRAP_EXPECT=1 GRPC_PORT=$GRPC DISABLE_TELEMETRY=true \
		GO_PROFILING_DISABLE=true PROMETHEUS_MONITORING_ENABLED=false \
		"$BIN" --host 127.0.0.1 --port "$PORT" --scheme http >"$RUN/server.log" 2>&1 &
	echo $! >"$RUN/pid"
	server_wait "curl -fsS '$URL/v1/.well-known/ready'" "$URL" 120
}

if [[ ${1:-} == grpc ]]; then
	echo "127.0.0.1:$GRPC"
	exit 0
fi
server_main "$@"
