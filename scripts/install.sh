# Installs what building and testing agentstream needs, skipping whatever is already there.
# Sourced by scripts/run.sh and scripts/test.sh; every step is idempotent and prints what it does.
#
# Reuse of build output: unless CARGO_TARGET_DIR is set, builds go to a directory outside the
# checkout (~/.cache/agentstream/target), so a fresh clone on the same machine (CI) does not
# rebuild the world.

AGENTSTREAM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentstream/target}"
export PATH="$HOME/.cargo/bin:$AGENTSTREAM_ROOT/end2end/node_modules/.bin:$PATH"

# cargo-leptos 0.3.11 needs a newer rustc than 1.95; 0.3.6 builds with it (about 20 minutes).
CARGO_LEPTOS_VERSION="0.3.6"

say() { printf '==> %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

ensure_wasm_target() {
  if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    say "adding the wasm32-unknown-unknown target"
    rustup target add wasm32-unknown-unknown
  fi
}

ensure_cargo_leptos() {
  if cargo leptos --version 2>/dev/null | grep -q "$CARGO_LEPTOS_VERSION"; then return; fi
  say "installing cargo-leptos $CARGO_LEPTOS_VERSION from source (about 20 minutes on 2 cores)"
  cargo install "cargo-leptos@$CARGO_LEPTOS_VERSION" --locked --features no_downloads
}

# cargo-leptos needs the wasm-bindgen CLI of exactly the version in Cargo.lock.
ensure_wasm_bindgen_cli() {
  local wanted have
  wanted="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' \
    "$AGENTSTREAM_ROOT/Cargo.lock")"
  have="$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }')"
  if [ "$have" = "$wanted" ]; then return; fi
  say "installing wasm-bindgen-cli $wanted (about 3 minutes)"
  # Not --locked: its own lockfile pins a crate the registry no longer serves.
  cargo install wasm-bindgen-cli --version "$wanted" --force
}

# npm packages of end2end/: Playwright's test runner (no browser download) and binaryen's
# wasm-opt. Debian's binaryen 108 produces a broken bundle; npm's binaryen goes first on PATH.
ensure_node_packages() {
  local directory="$AGENTSTREAM_ROOT/end2end"
  if [ ! -x "$directory/node_modules/.bin/wasm-opt" ] \
    || [ "$directory/package-lock.json" -nt "$directory/node_modules/.package-lock.json" ]; then
    say "installing the npm packages of end2end/"
    (cd "$directory" && npm ci --no-audit --no-fund)
  fi
}

ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then return; fi
  say "installing Chromium from Debian"
  as_root apt-get update
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y --no-install-recommends chromium
}

# cargo-fuzz, for scripts/fuzz.sh (about a minute to build).
CARGO_FUZZ_VERSION=0.13.2
ensure_cargo_fuzz() {
  if cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then return; fi
  say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
}

ensure_build_tools() {
  ensure_wasm_target
  ensure_node_packages
  ensure_wasm_bindgen_cli
  ensure_cargo_leptos
}

# Builds the release server and the site (wasm bundle, CSS, assets) under target/site.
build_release() {
  say "building the server and the site (cargo leptos build --release)"
  (cd "$AGENTSTREAM_ROOT" && cargo leptos build --release)
}
