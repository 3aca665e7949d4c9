#!/usr/bin/env bash
# The producer API under load, on the server alone: `produce-load.sh [SERVER_BINARY] [PRODUCERS]
# [SECONDS] [PER]` starts the binary (built in release from this checkout when none is named, or
# named `-`) on a fresh SQLite database, creates PRODUCERS agents (32),
# starts a run on each at Producer-Seq 0, then wrk sends PER events (64) per POST from one
# producer per wrk thread for SECONDS (5). Prints events/s, the server's CPU per event and the
# answers' p50/p99. `PER_APPEND`-sized Durable Streams appends of the same batches:
# server/examples/peers (`./scripts/bench.sh --peers`), or wrk with append.lua.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/../install.sh"
server=${1:--} producers=${2:-32} seconds=${3:-5} per=${4:-64}
ensure_wrk
if [ "$server" = - ]; then
  (cd "$AGENTSTREAM_ROOT" && CARGO_INCREMENTAL=0 cargo build --release -p server --bin server)
  server="$CARGO_TARGET_DIR/release/server"
fi
data=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
base=http://127.0.0.1:$port
LEPTOS_SITE_ADDR=127.0.0.1:$port DATABASE_URL=sqlite://$data/load.db RUST_LOG=warn \
  AGENTSTREAM_REQUESTS_PER_SUBJECT_MAX=1024 AGENTSTREAM_RUN_EVENTS_MAX=1000000000 \
  AGENTSTREAM_RUN_BYTES_MAX=1000000000000 "$server" >"$data/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 100); do curl -s -o /dev/null "$base/" && break; sleep 0.1; done
agents=""
for _ in $(seq "$producers"); do
  agent=$(curl -sf -X POST -H 'content-type: application/json' -d '{"name":"load"}' \
    "$base/v1/agents" | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  curl -sf -o /dev/null -X POST -H 'content-type: application/json' -H 'Producer-Id: load' \
    -H 'Producer-Epoch: 0' -H 'Producer-Seq: 0' -d '[{"kind":"run_started"}]' \
    "$base/v1/agents/$agent/produce"
  agents="$agents,$agent"
done
ticks_before=$(awk '{print $14 + $15}' "/proc/$pid/stat")
summary=$(AGENTS=${agents#,} PER=$per wrk -t"$producers" -c"$producers" -d"${seconds}s" \
  --timeout 10s -s "$here/produce.lua" "$base" | tail -1)
ticks_after=$(awk '{print $14 + $15}' "/proc/$pid/stat")
python3 - "$summary" $((ticks_after - ticks_before)) "$per" "$(getconf CLK_TCK)" <<'PY'
import json, sys
summary, ticks, per, hz = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
seconds = summary["duration_us"] / 1e6
events = summary["requests"] * per
print(f"{events / seconds:9.0f} events/s  cpu {ticks / hz * 1e6 / events:5.2f} us/event  "
      f"p50 {summary['p50_us'] / 1000:.1f} p99 {summary['p99_us'] / 1000:.1f} ms  "
      f"refused {summary['refused']} resynced {summary['resyncs']}")
PY
