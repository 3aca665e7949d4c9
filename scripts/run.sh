#!/usr/bin/env bash
# Runs agentstream: installs what is missing, builds, and serves on http://127.0.0.1:3000 with a
# SQLite file under ./data/ and the scripted provider. Arguments go to the server
# (`./scripts/run.sh --help` lists them).
# Override with LEPTOS_SITE_ADDR=host:port and DATABASE_URL=sqlite://path/to.db.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/install.sh"

ensure_build_tools
build_release

cd "$AGENTSTREAM_ROOT"
export LEPTOS_SITE_ROOT="${LEPTOS_SITE_ROOT:-$AGENTSTREAM_ROOT/target/site}"
export LEPTOS_SITE_ADDR="${LEPTOS_SITE_ADDR:-127.0.0.1:3000}"
export DATABASE_URL="${DATABASE_URL:-sqlite://$AGENTSTREAM_ROOT/data/agentstream.db}"
# The database URL as it may be shown: without its password.
shown_database="$(printf '%s' "$DATABASE_URL" | sed -E 's#(://[^:/@]*):[^@/]*@#\1:***@#; s#([?&][Pp][Aa][Ss][Ss][Ww][Oo][Rr][Dd]=)[^&]*#\1***#')"
say "ready in $SECONDS s; serving on http://$LEPTOS_SITE_ADDR (database $shown_database)"
exec "$CARGO_TARGET_DIR/release/server" "$@"
