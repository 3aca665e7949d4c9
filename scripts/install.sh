# Installs what building and testing agentstream needs, skipping whatever is already there.
# Sourced by scripts/run.sh, test.sh, bench.sh and fuzz.sh.
#
# Two rules keep it from failing silently (the scripts run under `set -euo pipefail`, where a
# failing pipeline ends the script without a word):
# - A probe (`probe_*`) never fails: it prints `ok <what>`, `missing` or `wrong <what>` and
#   returns 0 whatever is installed. scripts/test-install.sh checks each one with its tool absent.
# - Anything that can fail runs through `step "<what>" "<what to do>" command…`, which on failure
#   prints the step, the command, its status and what to do.
# Sourcing also sets an ERR trap, so a failure outside a step still names its command and line.
#
# What is needed: the Rust toolchain (rustup) with the wasm32 target, Node.js's npm (binaryen's
# wasm-opt and the browser tests' packages, in end2end/), and for the tests Debian's Chromium
# and PostgreSQL and cargo-fuzz. The site is built by the workspace's own build tool
# (`cargo xtask`, xtask/): no cargo-leptos or wasm-bindgen CLI to compile.
#
# Reuse of build output: unless CARGO_TARGET_DIR is set, builds go to a directory outside the
# checkout (~/.cache/agentstream/target), so a fresh clone on the same machine (CI) does not
# rebuild the world.

AGENTSTREAM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/agentstream/target}"
# The sbin directories last: runuser, and dpkg's helpers under apt-get, live there, and a PATH
# of /usr/bin:/bin alone (a login without them, `env -i`) would lose them.
export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$AGENTSTREAM_ROOT/end2end/node_modules/.bin:$PATH:/usr/local/sbin:/usr/sbin:/sbin"

say() { printf '==> %s\n' "$*" >&2; }

# Names the command that failed when `set -e` is about to end the script.
trap 'say "FAILED (status $?) at ${BASH_SOURCE[0]:-$0}:$LINENO: $BASH_COMMAND"' ERR

# step "<what>" "<what to do if it fails>" command args…
step() {
  local what="$1" hint="$2"
  shift 2
  say "$what"
  local started=$SECONDS status=0
  "$@" || status=$?
  if [ "$status" -ne 0 ]; then
    {
      echo "==> FAILED: $what"
      echo "    command: $*"
      echo "    exit status: $status"
      echo "    what to do: $hint"
    } >&2
    return "$status"
  fi
  say "$what: done in $((SECONDS - started)) s"
}

# fail "<what>" "<what to do>": a missing prerequisite that this script cannot install.
fail() {
  {
    echo "==> FAILED: $1"
    echo "    what to do: $2"
  } >&2
  return 1
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "not root and no sudo: cannot run $*" >&2
    return 1
  fi
}

# --- probes: each prints one line and returns 0 ---------------------------------------------

# The first line a command prints of its version, or nothing (never a failure).
version_of() {
  "$@" 2>/dev/null | head -n 1 || true
}

probe_rustup() {
  if command -v rustup >/dev/null 2>&1; then echo "ok $(version_of rustup --version)"; else echo missing; fi
}

probe_wasm_target() {
  if ! command -v rustup >/dev/null 2>&1; then echo missing; return 0; fi
  local installed
  installed="$(rustup target list --installed 2>/dev/null || true)"
  if grep -qx wasm32-unknown-unknown <<<"$installed"; then
    echo "ok wasm32-unknown-unknown"
  else
    echo missing
  fi
}

probe_npm() {
  if command -v npm >/dev/null 2>&1; then echo "ok npm $(version_of npm --version)"; else echo missing; fi
}

# end2end/'s npm packages: up to date when installed after the lockfile last changed.
probe_node_packages() {
  local directory="$AGENTSTREAM_ROOT/end2end"
  if [ ! -x "$directory/node_modules/.bin/wasm-opt" ]; then echo missing
  elif [ "$directory/package-lock.json" -nt "$directory/node_modules/.package-lock.json" ]; then
    echo "wrong (package-lock.json is newer than node_modules)"
  else echo "ok $(version_of "$directory/node_modules/.bin/wasm-opt" --version)"; fi
}

# The other npm packages the tests use: the example apps' (React, the AI SDK, esbuild: the
# browser tests bundle and serve examples/react-chat/ and examples/bring-your-own-loop/) and the
# Durable Streams conformance suite's (end2end/conformance/), and the official OpenAI clients
# (end2end/openai/: two `openai` majors and the Agents SDK, apart from end2end/'s packages because
# openai 5's optional zod 3 and the Agents SDK's zod 4 cannot share one tree). Up to date as
# end2end/'s are.
EXAMPLE_APPS="examples/react-chat examples/bring-your-own-loop end2end/conformance end2end/openai"
probe_example_packages() {
  local app directory
  for app in $EXAMPLE_APPS; do
    directory="$AGENTSTREAM_ROOT/$app"
    if [ ! -f "$directory/node_modules/.package-lock.json" ]; then echo missing; return; fi
    if [ "$directory/package-lock.json" -nt "$directory/node_modules/.package-lock.json" ]; then
      echo "wrong ($app/package-lock.json is newer than its node_modules)"; return
    fi
  done
  echo "ok $(version_of "$AGENTSTREAM_ROOT/examples/react-chat/node_modules/.bin/esbuild" --version)"
}

CHROMIUM_PATH="${CHROMIUM_PATH:-/usr/bin/chromium}"
# The official OpenAI Python clients (end2end/openai/python/): one virtual environment per pinned
# requirements file (openai 1.x; openai 3.x with the Agents SDK, which needs it), up to date when
# it was made from the file as it is now (a copy is kept in the environment).
OPENAI_PYTHON_SETS="openai1 openai3"
probe_openai_python() {
  local set directory="$AGENTSTREAM_ROOT/end2end/openai/python"
  if ! command -v python3 >/dev/null 2>&1; then echo missing; return; fi
  for set in $OPENAI_PYTHON_SETS; do
    if [ ! -x "$directory/.venv-$set/bin/python" ]; then echo missing; return; fi
    if ! cmp -s "$directory/requirements-$set.txt" "$directory/.venv-$set/requirements.txt"; then
      echo "wrong (.venv-$set was made from other requirements)"; return
    fi
  done
  echo "ok $(python3 --version 2>&1)"
}

probe_chromium() {
  if [ -x "$CHROMIUM_PATH" ]; then echo "ok $CHROMIUM_PATH"; else echo missing; fi
}

# cargo-fuzz, for scripts/fuzz.sh.
CARGO_FUZZ_VERSION=0.13.2
probe_cargo_fuzz() {
  local have
  have="$(version_of cargo fuzz --version)"
  case "$have" in
    "") echo missing ;;
    *"$CARGO_FUZZ_VERSION"*) echo "ok $have" ;;
    *) echo "wrong $have (wanted $CARGO_FUZZ_VERSION)" ;;
  esac
}

# PostgreSQL's server binaries (Debian's package): the directory of initdb.
AGENTSTREAM_POSTGRES_LIB="${AGENTSTREAM_POSTGRES_LIB:-/usr/lib/postgresql}"
postgres_bin() {
  local dir
  for dir in "$AGENTSTREAM_POSTGRES_LIB"/*/bin; do
    if [ -x "$dir/initdb" ]; then echo "$dir"; return 0; fi
  done
  return 1
}
probe_postgres() {
  local bin
  if bin="$(postgres_bin)"; then echo "ok $bin"; else echo missing; fi
}

# The openssl command: the https MCP test makes its certificate with it.
probe_openssl() {
  if command -v openssl >/dev/null 2>&1; then echo "ok $(command -v openssl)"; else echo missing; fi
}

# Prometheus: the metrics test scrapes the server with a real one (AGENTSTREAM_PROMETHEUS
# names another binary).
probe_prometheus() {
  local bin="${AGENTSTREAM_PROMETHEUS:-prometheus}"
  if command -v "$bin" >/dev/null 2>&1; then echo "ok $(command -v "$bin")"; else echo missing; fi
}

# --- ensure: probe, then install or say what to do ---------------------------------------

ensure_wasm_target() {
  case "$(probe_rustup)" in ok*) ;; *)
    fail "rustup not found" "install Rust with rustup (https://rustup.rs), then run this again"
    return ;;
  esac
  case "$(probe_wasm_target)" in ok*) return ;; esac
  step "adding the wasm32-unknown-unknown target (about 30 s)" \
    "check the network; rustup must reach static.rust-lang.org" \
    rustup target add wasm32-unknown-unknown
}

# npm packages of end2end/: binaryen's wasm-opt (Debian's binaryen 108 produces a broken
# bundle; npm's is used) and Playwright's test runner (no browser download).
ensure_node_packages() {
  case "$(probe_node_packages)" in ok*) return ;; esac
  case "$(probe_npm)" in ok*) ;; *)
    fail "npm not found (binaryen's wasm-opt and the browser tests come from npm)" \
      "install Node.js 20 or later with npm (Debian: apt-get install nodejs npm)"
    return ;;
  esac
  step "installing the npm packages of end2end/ (npm ci)" \
    "check the network (the npm registry) and that npm is 9 or later" \
    bash -c 'cd "$1" && npm ci --no-audit --no-fund' npm-ci "$AGENTSTREAM_ROOT/end2end"
}

ensure_example_packages() {
  case "$(probe_example_packages)" in ok*) return ;; esac
  case "$(probe_npm)" in ok*) ;; *)
    fail "npm not found (the example apps' packages come from npm)" \
      "install Node.js 20 or later with npm (Debian: apt-get install nodejs npm)"
    return ;;
  esac
  local app
  for app in $EXAMPLE_APPS; do
    step "installing the npm packages of $app/ (npm ci)" \
      "check the network (the npm registry) and that npm is 9 or later" \
      bash -c 'cd "$1" && npm ci --no-audit --no-fund' npm-ci "$AGENTSTREAM_ROOT/$app" || return
  done
}

ensure_openai_python() {
  case "$(probe_openai_python)" in ok*) return ;; esac
  if ! command -v python3 >/dev/null 2>&1; then
    fail "python3 not found (the OpenAI Python clients are tested with it)" \
      "install Python 3.9 or later with its venv module (Debian: apt-get install python3-venv)"
    return
  fi
  local set directory="$AGENTSTREAM_ROOT/end2end/openai/python"
  for set in $OPENAI_PYTHON_SETS; do
    rm -rf "$directory/.venv-$set"
    step "making end2end/openai/python/.venv-$set (python3 -m venv)" \
      "install Python's venv module (Debian: apt-get install python3-venv)" \
      python3 -m venv "$directory/.venv-$set" || return
    step "installing requirements-$set.txt (pip)" \
      "check the network (PyPI) and the pins in end2end/openai/python/requirements-$set.txt" \
      "$directory/.venv-$set/bin/pip" install --quiet --disable-pip-version-check \
      -r "$directory/requirements-$set.txt" || return
    cp "$directory/requirements-$set.txt" "$directory/.venv-$set/requirements.txt"
  done
}

ensure_chromium() {
  case "$(probe_chromium)" in ok*) return ;; esac
  step "installing Chromium from Debian (apt-get)" \
    "install Debian's chromium package yourself, or set CHROMIUM_PATH to a Chromium binary" \
    apt_install chromium
}

ensure_cargo_fuzz() {
  case "$(probe_cargo_fuzz)" in ok*) return ;; esac
  step "installing cargo-fuzz $CARGO_FUZZ_VERSION (about a minute)" \
    "check the network (crates.io); or install it yourself: cargo install cargo-fuzz --version $CARGO_FUZZ_VERSION --locked" \
    cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
}

ensure_postgres() {
  case "$(probe_postgres)" in ok*) return ;; esac
  step "installing PostgreSQL from Debian (apt-get)" \
    "install Debian's postgresql package yourself, or set AGENTSTREAM_TEST_DATABASE_URL to a PostgreSQL of your own" \
    apt_install postgresql
}

ensure_openssl() {
  case "$(probe_openssl)" in ok*) return ;; esac
  step "installing openssl from Debian (apt-get)" \
    "install Debian's openssl package yourself (the https MCP test makes a certificate with it)" \
    apt_install openssl
}

ensure_prometheus() {
  case "$(probe_prometheus)" in ok*) return ;; esac
  step "installing Prometheus from Debian (apt-get)" \
    "install Debian's prometheus package yourself, or set AGENTSTREAM_PROMETHEUS to a prometheus binary" \
    apt_install prometheus
}

# The peers of the wire-speed bench (`scripts/bench.sh --peers`): wrk (Debian) as the load
# generator, Electric's Rust Durable Streams server (crates.io, built once into the cache), and
# the protocol's Node reference server (the conformance suite's pinned package).
PEER_RUST_SERVER_VERSION=0.1.5
peer_root() { echo "${AGENTSTREAM_CACHE:-$HOME/.cache/agentstream}/peers"; }

probe_wrk() {
  if command -v wrk >/dev/null 2>&1; then echo "ok $(command -v wrk)"; else echo missing; fi
}

probe_peer_rust_server() {
  local bin; bin="$(peer_root)/durable-streams-$PEER_RUST_SERVER_VERSION/bin/durable-streams-server"
  if [ -x "$bin" ]; then echo "ok $bin"; else echo missing; fi
}

ensure_wrk() {
  case "$(probe_wrk)" in ok*) return ;; esac
  step "installing wrk from Debian (apt-get)" \
    "install Debian's wrk package yourself (the wire-speed bench's load generator)" \
    apt_install wrk
}

ensure_peer_rust_server() {
  case "$(probe_peer_rust_server)" in ok*) return ;; esac
  step "building Electric's Durable Streams server $PEER_RUST_SERVER_VERSION (cargo install, a few minutes, once)" \
    "run: cargo install durable-streams --version $PEER_RUST_SERVER_VERSION --locked --root $(peer_root)/durable-streams-$PEER_RUST_SERVER_VERSION" \
    cargo install durable-streams --version "$PEER_RUST_SERVER_VERSION" --locked \
      --root "$(peer_root)/durable-streams-$PEER_RUST_SERVER_VERSION"
}

ensure_peer_node_server() {
  if [ -d "$AGENTSTREAM_ROOT/end2end/conformance/node_modules/@durable-streams/server" ]; then return; fi
  step "installing the Durable Streams reference server (npm ci in end2end/conformance)" \
    "run: (cd end2end/conformance && npm ci)" \
    bash -c "cd '$AGENTSTREAM_ROOT/end2end/conformance' && npm ci --no-audit --no-fund"
}

apt_install() {
  as_root apt-get update && DEBIAN_FRONTEND=noninteractive as_root apt-get install -y --no-install-recommends "$@"
}

ensure_build_tools() {
  ensure_wasm_target
  ensure_node_packages
}

# Builds the release server and the site (wasm bundle, CSS, assets) under target/site with the
# workspace's build tool (xtask/; its first build takes about a minute and a half).
# The release site alone (the wasm bundle, compressed): the test command runs the browser tests
# and the conformance suite against the debug server its Rust tests already built.
# The site alone, for the tests: the xtask binary in the dev profile, whose dependencies
# `cargo test -p xtask` has already compiled (its release build costs about a minute more).
build_site() {
  step "building the site (cargo run -p xtask -- site --release)" \
    "read the step that failed above; a clean retry is: rm -rf $CARGO_TARGET_DIR" \
    bash -c 'cd "$1" && cargo run --quiet --package xtask -- site --release' xtask "$AGENTSTREAM_ROOT"
}

build_release() {
  step "building the server and the site (cargo xtask build --release)" \
    "read the step that failed above; a clean retry is: rm -rf $CARGO_TARGET_DIR" \
    bash -c 'cd "$1" && cargo xtask build --release' xtask "$AGENTSTREAM_ROOT"
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
  if [ "$(id -u)" = 0 ]; then chown postgres: "$AGENTSTREAM_PG_DIR"; fi
  say "starting a throwaway PostgreSQL in $AGENTSTREAM_PG_DIR on port $AGENTSTREAM_PG_PORT"
  step "creating the throwaway cluster (initdb)" "read initdb's message above" \
    as_postgres "$bin/initdb" -D "$AGENTSTREAM_PG_DIR/data" -U postgres -A trust -E UTF8 \
    --no-sync >/dev/null || return 1
  # Durable commits like production (fsync on, synchronous_commit on); enough connections for
  # many test servers at once.
  as_postgres "$bin/pg_ctl" -D "$AGENTSTREAM_PG_DIR/data" -l "$AGENTSTREAM_PG_DIR/log" -w \
    -o "-p $AGENTSTREAM_PG_PORT -k $AGENTSTREAM_PG_DIR -c listen_addresses=127.0.0.1 -c max_connections=400 -c shared_buffers=128MB" \
    start >/dev/null || {
      cat "$AGENTSTREAM_PG_DIR/log" >&2
      fail "starting the throwaway PostgreSQL (its log is above)" \
        "set AGENTSTREAM_TEST_DATABASE_URL to a PostgreSQL of your own"
      return 1
    }
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
