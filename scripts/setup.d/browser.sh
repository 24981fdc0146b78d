#!/usr/bin/env bash
# The console's browser tests: Chromium from Debian's packages, driven by Playwright's Python API
# through executable_path (Playwright never downloads a browser of its own here).
# Idempotent; exports CODEACT_CHROMIUM to $STATE_DIR/env.d/browser.env.
set -euo pipefail
STATE_DIR=${STATE_DIR:-.services}
mkdir -p "$STATE_DIR/env.d"
RECIPE="chromium fonts-dejavu-core"
STAMP="$STATE_DIR/browser.$(printf '%s' "$RECIPE" | sha256sum | cut -c1-12).done"
chromium_path() { command -v chromium || command -v chromium-browser || true; }
if [ ! -f "$STAMP" ] || [ -z "$(chromium_path)" ]; then
  missing=()
  for pkg in $RECIPE; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing+=("$pkg")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    printf '[browser] installing %s (apt-get)\n' "${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  touch "$STAMP"
fi
path=$(chromium_path)
if [ -z "$path" ]; then
  echo "[browser] chromium is not installed and apt-get could not install it" >&2
  exit 1
fi
printf 'export CODEACT_CHROMIUM=%q\n' "$path" >"$STATE_DIR/env.d/browser.env"
