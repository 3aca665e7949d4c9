#!/usr/bin/env bash
# Runs every test: the Rust unit and integration tests, then the Playwright tests in Debian's
# Chromium against the release build. Installs whatever is missing first. Exits non-zero on any
# failure and ends with a summary of each suite.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
set -e
ensure_build_tools
ensure_chromium
# A throwaway PostgreSQL for the second backend and the multi-server tests (unless
# AGENTSTREAM_TEST_DATABASE_URL names one already); stopped and removed on exit.
start_throwaway_postgres
trap stop_throwaway_postgres EXIT
export AGENTSTREAM_TEST_POSTGRES_URL="$AGENTSTREAM_TEST_DATABASE_URL"
set +e

cd "$AGENTSTREAM_ROOT"
# Incremental state is kept per checkout path: a test run of a fresh clone would only add to it.
export CARGO_INCREMENTAL=0
summary=()
failed=0
started=$SECONDS

run_suite() {
  local name="$1"; shift
  local log; log="$(mktemp)"
  say "$name: $*"
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local results
  if grep -q '^test result:' "$log"; then
    # Sum cargo's per-binary "test result:" lines into one.
    results="$(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
      END { printf "%d passed, %d failed", p, f }' "$log")"
  else
    results="$(grep -E '^ *[0-9]+ (passed|failed|flaky|skipped)' "$log" | sed 's/^ *//' | paste -sd ',' -)"
  fi
  summary+=("$name: $([ "$status" = 0 ] && echo ok || echo FAILED) — ${results:-no summary}")
  [ "$status" = 0 ] || failed=1
  rm -f "$log"
}

# app and server separately: one cargo command for the whole workspace would unify the `ssr`
# and `hydrate` features.
run_suite "app (cargo test)" cargo test -p app --no-fail-fast
# The server's suite on SQLite (the default backend; the two-server tests use PostgreSQL)…
run_suite "server on SQLite (cargo test)" env -u AGENTSTREAM_TEST_DATABASE_URL \
  cargo test -p server --no-fail-fast
# …and again with every test server on a fresh PostgreSQL database. Not again: the simulation
# and the kill -9 test (they drive SQLite files themselves) and the two-server tests (run above).
run_suite "server on PostgreSQL (cargo test)" cargo test -p server --no-fail-fast --tests -- \
  --skip simulated_faults --skip kill_9 --skip two_servers
# The benchmark, tiny, so it keeps building and running (figures: see the README).
run_suite "benchmark (smoke)" env AGENTSTREAM_BENCH_POSTGRES_URL="$AGENTSTREAM_TEST_DATABASE_URL" \
  cargo run -q -p server --example bench -- --smoke
# Each fuzz target briefly, so they keep building and a shallow crash shows up.
run_suite "fuzz (${AGENTSTREAM_FUZZ_SECONDS:-10} s per target)" scripts/fuzz.sh "${AGENTSTREAM_FUZZ_SECONDS:-10}"
if build_release; then
  run_suite "browser (playwright)" bash -c "cd end2end && npx playwright test"
else
  summary+=("release build: FAILED — playwright tests not run")
  failed=1
fi

echo
echo "==================== agentstream test summary ===================="
for line in "${summary[@]}"; do echo "$line"; done
echo "total time: $((SECONDS - started)) s"
[ "$failed" = 0 ] && echo "ALL PASSED" || echo "SOME TESTS FAILED"
exit "$failed"
