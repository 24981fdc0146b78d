#!/usr/bin/env bash
# Start / stop the real services the tests use: a Docker engine and a Redis server.
#   scripts/services.sh up     installs what is missing, starts what is not running,
#                              writes .services/env (CODEACT_TEST_REDIS_URL=...)
#   scripts/services.sh down   stops only what `up` started
set -euo pipefail
cd "$(dirname "$0")/.."
STATE=.services
mkdir -p "$STATE"

log() { printf '[services] %s\n' "$*" >&2; }

apt_install() {
  # Install Debian packages that are missing; apt-get update once per machine.
  local missing=()
  # "install ok installed" only: a removed package keeps its config files and still answers `dpkg -s`.
  for pkg in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" = "install ok installed" ] || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing ${missing[*]} (apt-get)"
  if [ ! -f /var/lib/apt/periodic/codeact-updated ] || [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock)" ]; then
    apt-get update -qq
    mkdir -p /var/lib/apt/periodic && touch /var/lib/apt/periodic/codeact-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

docker_up() {
  if docker info >/dev/null 2>&1; then log "docker engine already running"; return 0; fi
  log "starting dockerd"
  nohup dockerd >"$STATE/dockerd.log" 2>&1 &
  echo $! >"$STATE/dockerd.pid"
  for _ in $(seq 1 120); do
    if docker info >/dev/null 2>&1; then log "docker engine is up"; return 0; fi
    sleep 0.5
  done
  log "dockerd did not answer within 60 s; its log:"; tail -20 "$STATE/dockerd.log" >&2
  return 1
}

redis_up() {
  if [ -f "$STATE/redis.pid" ] && kill -0 "$(cat "$STATE/redis.pid")" 2>/dev/null; then
    log "redis already running (started by us)"; return 0
  fi
  local port; port=$(free_port)
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
    --pidfile "$PWD/$STATE/redis.pid" --logfile "$PWD/$STATE/redis.log"
  for _ in $(seq 1 50); do
    if redis-cli -p "$port" ping >/dev/null 2>&1; then break; fi
    sleep 0.1
  done
  redis-cli -p "$port" ping >/dev/null
  echo "export CODEACT_TEST_REDIS_URL=redis://127.0.0.1:$port/0" >"$STATE/env"
  log "redis is up on port $port"
}

up() {
  apt_install redis-server redis-tools docker.io debootstrap bubblewrap
  docker_up
  redis_up
}

down() {
  if [ -f "$STATE/redis.pid" ]; then
    kill "$(cat "$STATE/redis.pid")" 2>/dev/null || true
    rm -f "$STATE/redis.pid" "$STATE/env"
    log "redis stopped"
  fi
  if [ -f "$STATE/dockerd.pid" ]; then
    local pid; pid=$(cat "$STATE/dockerd.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$STATE/dockerd.pid"
    log "dockerd stopped"
  fi
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac
