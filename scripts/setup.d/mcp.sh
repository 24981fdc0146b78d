#!/usr/bin/env bash
# The MCP reference servers the tests drive (tests/toolkits/mcp): installed with npm into a cache
# directory named by a hash of this recipe, so tests run them from disk (never `npx -y` at test time).
# Exports CODEACT_MCP_EVERYTHING and CODEACT_MCP_FILESYSTEM (the servers' entry scripts) to
# $STATE_DIR/env.d/mcp.env.
set -euo pipefail

PACKAGES=("@modelcontextprotocol/server-everything@2026.8.31" "@modelcontextprotocol/server-filesystem@2026.8.31")
STATE_DIR="${STATE_DIR:-$PWD/.services}"
CACHE_ROOT="${CODEACT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/codeact}/mcp-servers"

if ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "mcp.sh: installing nodejs and npm from Debian packages" >&2
    sudo -n apt-get install -y nodejs npm >/dev/null 2>&1 || apt-get install -y nodejs npm >/dev/null
  fi
fi
command -v node >/dev/null 2>&1 || { echo "mcp.sh: node is missing; install nodejs" >&2; exit 1; }

recipe="$(printf '%s\n' "${PACKAGES[@]}" "$(node --version)")"
hash="$(printf '%s' "$recipe" | sha256sum | cut -c1-16)"
dir="$CACHE_ROOT/$hash"
if [ ! -f "$dir/.done" ]; then
  rm -rf "$dir.tmp"
  mkdir -p "$dir.tmp"
  (cd "$dir.tmp" && npm init -y >/dev/null && npm install --no-audit --no-fund --loglevel=error "${PACKAGES[@]}" >/dev/null)
  rm -rf "$dir"
  mv "$dir.tmp" "$dir"
  touch "$dir/.done"
fi

everything="$dir/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
filesystem="$dir/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
for f in "$everything" "$filesystem"; do
  [ -f "$f" ] || { echo "mcp.sh: $f is missing after npm install" >&2; exit 1; }
done
mkdir -p "$STATE_DIR/env.d"
{
  echo "export CODEACT_MCP_EVERYTHING='$everything'"
  echo "export CODEACT_MCP_FILESYSTEM='$filesystem'"
} > "$STATE_DIR/env.d/mcp.env"
