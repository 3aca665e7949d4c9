#!/usr/bin/env bash
# Checks scripts/install.sh the way a new machine meets it: each probe, run under the same
# `set -euo pipefail` as run.sh and test.sh in an environment where its tool is absent, must
# print "missing" (or "wrong …") and let the script go on; and each `ensure_*` that cannot
# install its tool must fail with the step and what to do. (A probe that failed inside a pipeline
# once ended run.sh with status 127 and no message on every machine without the wasm-bindgen CLI.)
# Part of scripts/test.sh; needs nothing installed beyond bash and coreutils.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
scratch="$(mktemp -d /tmp/agentstream-install-test.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT

# A PATH of basic tools only: no rustup, cargo, npm, node, wasm-opt.
bare="$scratch/bare-bin"
mkdir -p "$bare"
for tool in bash sh dirname head grep cat id env mktemp rm ls awk sed tr printf; do
  found="$(command -v "$tool")" && ln -s "$found" "$bare/$tool"
done

passed=0
failed=0

# check "<name>" "<expected status>" "<text the output must contain>" "<shell code>" [VAR=value…]
# Runs the code after sourcing install.sh under `set -euo pipefail`, in a clean environment
# with the given variables, and checks how it ended.
check() {
  local name="$1" want_status="$2" want_text="$3" code="$4"
  shift 4
  local output status
  output="$(env -i HOME="$scratch/home" "PATH=$bare" "$@" bash -c "
    set -euo pipefail
    source '$root/scripts/install.sh'
    $code
    echo 'script went on'" 2>&1)"
  status=$?
  if [ "$status" = "$want_status" ] && [[ "$output" == *"$want_text"* ]] \
    && { [ "$want_status" != 0 ] || [[ "$output" == *"script went on"* ]]; }; then
    passed=$((passed + 1))
    echo "ok   $name"
  else
    failed=$((failed + 1))
    echo "FAIL $name: status $status (wanted $want_status), output:"
    printf '%s\n' "$output" | sed 's/^/       /'
  fi
}

mkdir -p "$scratch/home" "$scratch/empty-root/scripts" "$scratch/fake-bin"
cp "$root/scripts/install.sh" "$scratch/empty-root/scripts/"

# A rustup that knows only the host target, and a cargo whose only subcommand is a cargo-fuzz
# beside it (none here; an old one below).
cat >"$scratch/fake-bin/rustup" <<'EOF'
#!/bin/sh
case "$*" in "target list --installed") echo x86_64-unknown-linux-gnu ;; *) echo "rustup 1.28.2" ;; esac
EOF
cat >"$scratch/fake-bin/cargo" <<'EOF'
#!/bin/sh
if [ "$1" = fuzz ] && [ -x "$(dirname "$0")/cargo-fuzz" ]; then exec "$(dirname "$0")/cargo-fuzz" "$@"; fi
echo "error: no such command: \`$1\`" >&2; exit 101
EOF
chmod +x "$scratch/fake-bin/"*
fake="$scratch/fake-bin:$bare"

echo "== probes with their tool absent: 'missing', and the script goes on"
check "rustup absent" 0 missing 'probe_rustup'
check "wasm32 target: rustup absent" 0 missing 'probe_wasm_target'
check "wasm32 target: not installed" 0 missing 'probe_wasm_target' "PATH=$fake"
check "npm absent" 0 missing 'probe_npm'

check "npm packages absent (empty checkout)" 0 missing \
  "source '$scratch/empty-root/scripts/install.sh'; probe_node_packages"
check "example packages absent (empty checkout)" 0 missing \
  "source '$scratch/empty-root/scripts/install.sh'; probe_example_packages"
check "python absent: the OpenAI Python clients" 0 missing 'probe_openai_python'
check "the OpenAI Python clients absent (empty checkout)" 0 missing \
  "source '$scratch/empty-root/scripts/install.sh'; probe_openai_python" \
  "PATH=$bare:$(dirname "$(command -v python3)")"
check "chromium absent" 0 missing 'probe_chromium' CHROMIUM_PATH=/nonexistent/chromium
check "cargo absent: cargo-fuzz" 0 missing 'probe_cargo_fuzz'
check "cargo-fuzz absent" 0 missing 'probe_cargo_fuzz' "PATH=$fake"
check "postgres absent" 0 missing 'probe_postgres' AGENTSTREAM_POSTGRES_LIB=/nonexistent
check "openssl absent" 0 missing 'probe_openssl'
check "prometheus absent" 0 missing 'probe_prometheus' AGENTSTREAM_PROMETHEUS=/nonexistent/prometheus
check "wrk absent" 0 missing 'probe_wrk'
check "the Rust peer server absent" 0 missing 'probe_peer_rust_server' AGENTSTREAM_CACHE=/nonexistent
check "every probe at once" 0 "script went on" \
  'for probe in rustup wasm_target npm node_packages example_packages openai_python chromium cargo_fuzz postgres openssl prometheus wrk peer_rust_server; do probe_$probe; done'

echo "== probes that find a tool of the wrong kind"
mkdir -p "$scratch/old-fuzz/bin" && cp "$scratch/fake-bin/cargo" "$scratch/old-fuzz/bin/"
printf '#!/bin/sh\necho "cargo-fuzz 0.11.0"\n' >"$scratch/old-fuzz/bin/cargo-fuzz"
chmod +x "$scratch/old-fuzz/bin/cargo-fuzz"
check "cargo-fuzz too old" 0 "wrong cargo-fuzz 0.11.0" 'probe_cargo_fuzz' "PATH=$scratch/old-fuzz/bin:$bare"
check "chromium present" 0 "ok /bin/sh" 'probe_chromium' CHROMIUM_PATH=/bin/sh

echo "== what cannot be installed fails with the step and what to do"
check "no rustup" 1 "what to do: install Rust with rustup" 'ensure_wasm_target'
check "no npm" 1 "what to do: install Node.js" \
  "source '$scratch/empty-root/scripts/install.sh'; ensure_node_packages"
check "no npm: example packages" 1 "what to do: install Node.js" \
  "source '$scratch/empty-root/scripts/install.sh'; ensure_example_packages"
check "no python: the OpenAI Python clients" 1 "what to do: install Python" 'ensure_openai_python'
check "a failing step names its command" 3 "command: bash -c exit 3" \
  'step "an example step" "do something else" bash -c "exit 3"'

echo "  $passed passed"
if [ "$failed" != 0 ]; then echo "  $failed failed"; exit 1; fi
