#!/usr/bin/env bash
# The benchmark (release build): SQLite figures, then the same on a throwaway PostgreSQL.
# `--smoke` runs a tiny version. What it measures: README, "Test"; one run's figures: README, "Performance".
#
# `--peers [options]`: the wire-speed bench instead — agentstream's Durable Streams surface beside
# Electric's Rust server and the protocol's Node reference server, installed here on first use
# (wrk from Debian, the Rust server built by cargo install into ~/.cache/agentstream/peers, the
# Node server from end2end/conformance). Options: server/examples/peers/main.rs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
cd "$AGENTSTREAM_ROOT"
# The release profile compiles incrementally (quick rebuilds while working); what is measured is
# built without: an incremental build inlines less across its codegen units, and its batched
# appends measured 11–21 % slower than the same code built whole.
export CARGO_INCREMENTAL=0
if [ "${1:-}" = "--peers" ]; then
  shift
  ensure_wrk
  ensure_peer_rust_server
  ensure_peer_node_server
  export AGENTSTREAM_PEER_RUST_SERVER
  AGENTSTREAM_PEER_RUST_SERVER="$(probe_peer_rust_server | sed 's/^ok //')"
  cargo build --release -p server --bin server
  exec cargo run --release -p server --example peers -- "$@"
fi
start_throwaway_postgres
trap stop_throwaway_postgres EXIT
export AGENTSTREAM_BENCH_POSTGRES_URL="${AGENTSTREAM_BENCH_POSTGRES_URL:-$AGENTSTREAM_TEST_DATABASE_URL}"
# The idle-memory figure runs the release server binary in its own process.
cargo build --release -p server --bin server
cargo run --release -p server --example bench -- "$@"
