#!/usr/bin/env bash
# Tries the README's commands as a newcomer would: a fresh clone of this checkout's HEAD, a
# temporary HOME whose ~/.cargo/bin holds only the toolchain's proxies (so nothing installed by
# hand is visible: no cargo tools, no crates.io cache, no npm cache, no build output), and a PATH
# of that bin plus /usr/bin:/bin.
#
#   scripts/fresh-clone.sh run    ./scripts/run.sh until the page is served (then stops it)
#   scripts/fresh-clone.sh test   ./scripts/test.sh
#   scripts/fresh-clone.sh both   run, then test in the same clone (what a newcomer does)
#
# Prints the time of each command. System packages (Chromium, PostgreSQL) and the rustup
# toolchain's targets are the machine's: remove them first to measure their installation too.
# Keeps the scratch directory (AGENTSTREAM_FRESH_KEEP=1) or removes it at the end.
set -euo pipefail
what="${1:-both}"
source_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="$(mktemp -d /tmp/agentstream-fresh.XXXXXX)"
[ "${AGENTSTREAM_FRESH_KEEP:-0}" = 1 ] || trap 'rm -rf "$scratch"' EXIT
home="$scratch/home"
mkdir -p "$home/.cargo/bin"
real_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
for proxy in cargo rustc rustup rustfmt cargo-fmt cargo-clippy clippy-driver rustdoc; do
  if [ -e "$real_bin/$proxy" ]; then ln -s "$real_bin/$proxy" "$home/.cargo/bin/$proxy"; fi
done
git clone -q "$source_root" "$scratch/agentstream"
cd "$scratch/agentstream"
echo "fresh clone of $(git rev-parse --short HEAD) in $scratch/agentstream, HOME=$home"

fresh() {
  env -i HOME="$home" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}" \
    PATH="$home/.cargo/bin:/usr/bin:/bin" TERM="${TERM:-dumb}" LANG=C.UTF-8 "$@"
}

port=3900
if [ "$what" = run ] || [ "$what" = both ]; then
  started=$SECONDS
  fresh LEPTOS_SITE_ADDR="127.0.0.1:$port" ./scripts/run.sh >"$scratch/run.log" 2>&1 &
  server=$!
  # Until the page is served with its bundle (or run.sh ends: then it failed).
  until curl -sf "http://127.0.0.1:$port/" 2>/dev/null | grep -q "/pkg/agentstream.wasm"; do
    if ! kill -0 "$server" 2>/dev/null; then
      tail -30 "$scratch/run.log"
      echo "run.sh ended before serving the page (log above)"
      exit 1
    fi
    sleep 2
  done
  run_seconds=$((SECONDS - started))
  # `$!` is the subshell that runs `fresh`; run.sh (exec'd by env) execs the server in its
  # child, so stop the child first: killing the subshell alone left the server running.
  pkill -TERM -P "$server" || true
  kill "$server" 2>/dev/null || true
  wait "$server" || true
  grep -E "^==> .*(done in|ready in)" "$scratch/run.log" || true
  echo "run: the page was served $run_seconds s after ./scripts/run.sh started"
fi
if [ "$what" = test ] || [ "$what" = both ]; then
  started=$SECONDS
  status=0
  fresh ./scripts/test.sh >"$scratch/test.log" 2>&1 || status=$?
  grep -E "^==> .*done in|setup done" "$scratch/test.log" || true
  sed -n '/agentstream test summary/,$p' "$scratch/test.log"
  echo "test: exit status $status after $((SECONDS - started)) s (log: $scratch/test.log)"
  exit "$status"
fi
