#!/usr/bin/env bash
# Runs every test: the Rust unit and integration tests, then the Playwright tests in Debian's
# Chromium against the release build. Installs whatever is missing first. Exits non-zero on any
# failure and ends with a summary of each suite.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"
set -e
setup_started=$SECONDS
ensure_build_tools
ensure_example_packages
ensure_openai_python
ensure_chromium
ensure_openssl
ensure_prometheus
# A throwaway PostgreSQL for the second backend and the multi-server tests (unless
# AGENTSTREAM_TEST_DATABASE_URL names one already); stopped and removed on exit.
start_throwaway_postgres
trap stop_throwaway_postgres EXIT
export AGENTSTREAM_TEST_POSTGRES_URL="$AGENTSTREAM_TEST_DATABASE_URL"
# Clippy's driver, the compiler of the workspace's own crates in the builds below.
if ! clippy_driver="$(rustup which clippy-driver 2>/dev/null)"; then
  say "adding clippy (rustup component add clippy)"
  rustup component add clippy
  clippy_driver="$(rustup which clippy-driver)"
fi
say "setup done in $((SECONDS - setup_started)) s"
# From here on a failing suite is counted, not fatal (and not reported twice by install.sh's trap).
set +e
trap - ERR

cd "$AGENTSTREAM_ROOT"
# Incremental state is kept per checkout path: a test run of a fresh clone would only add to it.
export CARGO_INCREMENTAL=0
summary=()
failed=0
started=$SECONDS

run_suite() {
  local name="$1"; shift
  local log; log="$(mktemp)"
  local suite_started=$SECONDS
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
  summary+=("$name: $([ "$status" = 0 ] && echo ok || echo FAILED) — ${results:-no summary} ($((SECONDS - suite_started)) s)")
  [ "$status" = 0 ] || failed=1
  rm -f "$log"
}

run_suite "install script probes" scripts/test-install.sh
# The habits of the field: formatted, and clippy-clean (warnings denied) for both targets. Per
# target, not --workspace: one cargo command for the whole workspace would unify the `ssr` and
# `hydrate` features.
run_suite "format (cargo fmt --check)" bash -c \
  "cargo fmt --all --check && cargo fmt --check --manifest-path fuzz/Cargo.toml"
# The site (the wasm bundle: five to seven minutes of compiling on a fresh machine) builds in
# the background from here on, beside the native builds and the server's suites, in a target
# directory of its own so that neither cargo waits for the other's lock. Started this early it
# fills the time a build leaves a core idle (one crate's front end, a test binary's link, the
# bundle's own single-threaded link-time optimisation) and the suites' waiting (on timers, fsyncs
# and the database).
site_log="$(mktemp)"
# Built by plain rustc: clippy's driver would turn MIR optimisations off in the shipped bundle.
(unset RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
 CARGO_TARGET_DIR="$CARGO_TARGET_DIR/site-build" build_site >"$site_log" 2>&1) &
site_build=$!
# Native code is linted by the builds below rather than by `cargo clippy`: with clippy's driver
# as the compiler of the workspace's own crates (what `cargo clippy` itself sets up), every test
# build is also the clippy run, so the dependencies are compiled once instead of twice (a
# `cargo clippy` of the native targets cost 266 s on a fresh machine, most of it dependencies
# compiled again in check mode). Warnings are denied. Every cargo command in this script runs
# with these two variables: one without them would build the workspace's crates again.
export RUSTC_WORKSPACE_WRAPPER="$clippy_driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# The wasm side has no native build here to ride on (the site's release build must stay exactly
# the shipped one), so it gets a clippy run of its own.
run_suite "clippy (frontend and app, wasm32)" \
  cargo clippy -p app -p frontend --target wasm32-unknown-unknown -- -D warnings
# …and the run inspector's bundle, whose islands are chosen by a feature (xtask/src/project.rs).
run_suite "clippy (the inspector's bundle, wasm32)" cargo clippy -p app -p frontend \
  --target wasm32-unknown-unknown --features frontend/inspector -- -D warnings
run_suite "xtask (cargo test, clippy-checked)" cargo test -p xtask
# The module graph: no circle between files and no arrow up the floors beyond the known ones
# (xtask/deps-known.txt, being taken apart; ARCHITECTURE.md, "Code map").
run_suite "module graph (cargo xtask deps)" cargo run -q -p xtask -- deps
run_suite "app (cargo test, clippy-checked)" cargo test -p app --no-fail-fast
# The server's tests, compiled once for both suites below.
run_suite "server tests' build, clippy-checked (cargo test --no-run)" cargo test -p server --no-run
# Tests the server's suites run at once: two per core. Most of a test's time is waiting (on a
# server's sockets, timers and fsyncs), so on 2 cores the integration binary took 136 s with
# two at once (cargo's default, one per core), 89 s with four and 109 s with eight.
server_test_threads=$(( 2 * $(nproc) ))
# The server's suite on SQLite (the default backend; the two-server tests use PostgreSQL)…
run_suite "server on SQLite (cargo test)" env -u AGENTSTREAM_TEST_DATABASE_URL \
  RUST_TEST_THREADS="$server_test_threads" cargo test -p server --no-fail-fast
# …and again with every test server on a fresh PostgreSQL database. Not again: the simulation
# and the kill -9 test (they drive SQLite files themselves), the two-server tests (run above)
# and the 200 000-event log (its paging and folding are above the store; once is enough).
run_suite "server on PostgreSQL (cargo test)" env RUST_TEST_THREADS="$server_test_threads" \
  cargo test -p server --no-fail-fast --tests -- \
  --skip simulated_faults --skip kill_9 --skip two_servers --skip a_long_log
# The benchmark, tiny, so it keeps building and running (figures: see the README).
run_suite "benchmark (smoke)" env AGENTSTREAM_BENCH_POSTGRES_URL="$AGENTSTREAM_TEST_DATABASE_URL" \
  cargo run -q -p server --example bench -- --smoke
# The fuzz targets are not here: their workspace's cold build (every dependency again, with
# coverage instrumentation) costs about 8 minutes, more than this command's budget leaves.
# .ci/run runs them after this command; scripts/fuzz.sh runs them by hand.
# The browser tests and the conformance suite run the debug server binary `cargo test -p server`
# built above (the same code as the release one, checked by clippy and every test; its release
# compile would add about 8 minutes to a fresh machine's run), with the release site.
export AGENTSTREAM_SERVER_BIN="$CARGO_TARGET_DIR/debug/server"
site_status=0
wait "$site_build" || site_status=$?
cat "$site_log"
rm -f "$site_log"
if [ "$site_status" = 0 ]; then
  run_suite "browser (playwright)" bash -c "cd end2end && npx playwright test"
  # The Durable Streams protocol's official suite against /v1/streams on both stores, beside
  # its reference server (end2end/conformance/README.md).
  run_suite "Durable Streams conformance (official suite)" \
    env AGENTSTREAM_PSQL="$(postgres_bin)/psql" node end2end/conformance/run.mjs
else
  summary+=("site build: FAILED — playwright tests not run")
  failed=1
fi

echo
echo "==================== agentstream test summary ===================="
for line in "${summary[@]}"; do echo "$line"; done
echo "total time: $((SECONDS - started)) s"
[ "$failed" = 0 ] && echo "ALL PASSED" || echo "SOME TESTS FAILED"
exit "$failed"
