#!/usr/bin/env bash
# The benchmark (release build): SQLite figures, then the same on a throwaway PostgreSQL.
# `--smoke` runs a tiny version. What it measures: README, "Test"; one run's figures: README, "Performance".
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
cd "$AGENTSTREAM_ROOT"
start_throwaway_postgres
trap stop_throwaway_postgres EXIT
export AGENTSTREAM_BENCH_POSTGRES_URL="${AGENTSTREAM_BENCH_POSTGRES_URL:-$AGENTSTREAM_TEST_DATABASE_URL}"
# The idle-memory figure runs the release server binary in its own process.
cargo build --release -p server --bin server
cargo run --release -p server --example bench -- "$@"
