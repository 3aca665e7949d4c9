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

# PostgreSQL binaries (Debian's package). The server itself needs none of this; the test command
# runs the integration suite against a throwaway PostgreSQL as well as SQLite.
postgres_bin() {
  local dir
  for dir in /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  done
  return 1
}

ensure_postgres() {
  if postgres_bin >/dev/null; then return; fi
  say "installing PostgreSQL from Debian"
  as_root apt-get update
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y --no-install-recommends postgresql
}

# Runs a command as the owner of a throwaway cluster: `initdb` and `postgres` refuse to run as
# root, so as root they run as Debian's `postgres` user.
as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# Starts a throwaway PostgreSQL (its own data directory, loopback only, trust auth) unless
# AGENTSTREAM_TEST_DATABASE_URL already names one, and exports that variable. The cluster is
# stopped and removed by stop_throwaway_postgres.
start_throwaway_postgres() {
  if [ -n "${AGENTSTREAM_TEST_DATABASE_URL:-}" ]; then return; fi
  ensure_postgres
  local bin; bin="$(postgres_bin)"
  # The first free port from 55432 (another cluster may be running).
  AGENTSTREAM_PG_PORT="${AGENTSTREAM_PG_PORT:-55432}"
  while (exec 3<>"/dev/tcp/127.0.0.1/$AGENTSTREAM_PG_PORT") 2>/dev/null; do
    AGENTSTREAM_PG_PORT=$((AGENTSTREAM_PG_PORT + 1))
  done
  AGENTSTREAM_PG_DIR="$(mktemp -d /tmp/agentstream-pg.XXXXXX)"
  export AGENTSTREAM_PG_DIR
  [ "$(id -u)" = 0 ] && chown postgres: "$AGENTSTREAM_PG_DIR"
  say "starting a throwaway PostgreSQL in $AGENTSTREAM_PG_DIR on port $AGENTSTREAM_PG_PORT"
  as_postgres "$bin/initdb" -D "$AGENTSTREAM_PG_DIR/data" -U postgres -A trust -E UTF8 \
    --no-sync >/dev/null || return 1
  # Durable commits like production (fsync on, synchronous_commit on); enough connections for
  # many test servers at once.
  as_postgres "$bin/pg_ctl" -D "$AGENTSTREAM_PG_DIR/data" -l "$AGENTSTREAM_PG_DIR/log" -w \
    -o "-p $AGENTSTREAM_PG_PORT -k $AGENTSTREAM_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=128MB" \
    start >/dev/null || { cat "$AGENTSTREAM_PG_DIR/log" >&2; return 1; }
  export AGENTSTREAM_TEST_DATABASE_URL="postgres://postgres@127.0.0.1:$AGENTSTREAM_PG_PORT/postgres"
  # Tests that restart PostgreSQL mid-stream use these.
  export AGENTSTREAM_TEST_PG_CTL="$bin/pg_ctl"
  export AGENTSTREAM_TEST_PG_DATA="$AGENTSTREAM_PG_DIR/data"
}

stop_throwaway_postgres() {
  if [ -z "${AGENTSTREAM_PG_DIR:-}" ]; then return; fi
  as_postgres "$(postgres_bin)/pg_ctl" -D "$AGENTSTREAM_PG_DIR/data" -m immediate stop >/dev/null 2>&1
  rm -rf "$AGENTSTREAM_PG_DIR"
  unset AGENTSTREAM_PG_DIR
}
