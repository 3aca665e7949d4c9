#!/usr/bin/env bash
# Runs every fuzz target (fuzz/) for a while each: `scripts/fuzz.sh [seconds per target]`.
# cargo-fuzz needs nightly compiler flags; RUSTC_BOOTSTRAP=1 lets the stable toolchain take them.
# No sanitizer: the code under test is safe Rust, and ASan would rebuild the standard library.
set -euo pipefail
source "$(dirname "$0")/install.sh"
ensure_cargo_fuzz
seconds="${1:-30}"
cd "$AGENTSTREAM_ROOT/fuzz"
export RUSTC_BOOTSTRAP=1
cargo fuzz build --sanitizer none
failed=0
passed=0
for target in $(cargo fuzz list); do
  mkdir -p "corpus/$target"
  if [ -d "seeds/$target" ]; then cp -n "seeds/$target"/* "corpus/$target/" 2>/dev/null || true; fi
  say "fuzzing $target for ${seconds} s"
  log="$(mktemp)"
  started="$(mktemp)"  # artifacts newer than this one were written by this run
  set +e
  cargo fuzz run --sanitizer none "$target" "corpus/$target" -- \
    -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
  status=$?
  set -e
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done [0-9]+ runs" "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log"
    crash="$(find "artifacts/$target" -type f -newer "$started" 2>/dev/null | head -1)"
    if [ -n "$crash" ]; then
      echo "fuzz target $target FAILED (the crashing input is fuzz/$crash)"
    else
      echo "fuzz target $target FAILED before it found anything (no crashing input: the log above says why, e.g. a build error)"
    fi
    failed=$((failed + 1))
  else
    passed=$((passed + 1))
  fi
  rm -f "$log" "$started"
done
echo "  $passed passed"
[ "$failed" = 0 ] || echo "  $failed failed"
[ "$failed" = 0 ]
