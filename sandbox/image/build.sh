#!/usr/bin/env bash
# Build the Docker sandbox image from Debian packages (no image registry is needed).
#   sandbox/image/build.sh            builds codeact-sandbox:<recipe-hash> unless it exists
#   sandbox/image/build.sh --tag      prints the tag only
# The tag is a hash of this recipe (this file), computed the same way by
# sandbox.image.image_tag(), so a changed recipe means a new image and an unchanged one is reused.
# The runtime code is NOT baked in: it is bind-mounted read-only at run time.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
HASH=$(sha256sum "$HERE/build.sh" | cut -c1-12)
TAG="codeact-sandbox:$HASH"
SUITE=bookworm
MIRROR=${CODEACT_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [ "${1:-}" = "--tag" ]; then echo "$TAG"; exit 0; fi

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "[sandbox-image] $TAG is cached; nothing to build" >&2
  echo "$TAG"; exit 0
fi

command -v debootstrap >/dev/null || { echo "[sandbox-image] debootstrap missing: apt-get install -y debootstrap" >&2; exit 1; }
ROOT=$(mktemp -d /tmp/codeact-rootfs.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT
echo "[sandbox-image] debootstrap $SUITE (minbase + python3) into $ROOT, about a minute" >&2
debootstrap --variant=minbase --include=python3 "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 || {
  tail -30 "$ROOT.log" >&2; exit 1; }
rm -f "$ROOT.log"
# Slim down: package caches and docs are not needed at run time.
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/usr/share/doc/* \
       "$ROOT"/usr/share/man/* "$ROOT"/usr/share/locale/*
mkdir -p "$ROOT/opt/codeact/runtime" "$ROOT/work"
chmod 1777 "$ROOT/work"
echo "[sandbox-image] importing as $TAG" >&2
tar -C "$ROOT" -c . | docker import \
  --change 'USER 65534:65534' --change 'WORKDIR /work' --change 'ENV PYTHONDONTWRITEBYTECODE=1' \
  --change 'LABEL org.codeact.sandbox=1' - "$TAG" >/dev/null
echo "$TAG"
