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

# gVisor: the Docker backend's strongest setting (`runtime: gvisor`) needs the engine's `runsc` runtime.
# --host-uds=open lets the sandbox connect to the bridge socket bind-mounted into it (nothing else is).
DAEMON_JSON=${CODEACT_DOCKER_DAEMON_JSON:-/etc/docker/daemon.json}

gvisor_config() {
  # Register runsc in daemon.json (merged, other keys kept); prints "changed" when the file changed.
  python3 - "$DAEMON_JSON" <<'PY'
import json, os, sys
path = sys.argv[1]
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
wanted = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}
if config.get("runtimes", {}).get("runsc") != wanted:
    config.setdefault("runtimes", {})["runsc"] = wanted
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
PY
}

gvisor_up() {
  # Idempotent: a running dockerd is only reloaded (SIGHUP: "runtimes" is a live-reloadable option,
  # running containers are untouched) when the runtime is not registered yet.
  apt_install runsc
  local changed; changed=$(gvisor_config)
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then return 0; fi
  if [ -n "$changed" ]; then log "registered the gVisor runtime (runsc) in $DAEMON_JSON"; fi
  local pid; pid=$(pgrep -x dockerd | head -1 || true)
  if [ -n "$pid" ]; then
    log "reloading dockerd ($pid) so it sees the runsc runtime"
    kill -HUP "$pid"
    for _ in $(seq 1 20); do
      if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then return 0; fi
      sleep 0.25
    done
    log "dockerd did not register runsc after a reload; check $DAEMON_JSON and the engine's log"
    return 1
  fi
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
  {
    echo "export CODEACT_TEST_REDIS_URL=redis://127.0.0.1:$port/0"
    # What the set-up scripts (scripts/setup.d) export: browser path, npm cache, ...
    echo 'for _f in "$(dirname "${BASH_SOURCE[0]}")"/env.d/*.env; do if [ -e "$_f" ]; then source "$_f"; fi; done'
  } >"$STATE/env"
  log "redis is up on port $port"
}

up() {
  apt_install redis-server redis-tools docker.io debootstrap bubblewrap
  apt_install runsc
  gvisor_config >/dev/null
  docker_up
  gvisor_up
  redis_up
  setup_scripts
}

setup_scripts() {
  # Each scripts/setup.d/NAME.sh installs what one test area needs (idempotent, cached by a hash of
  # its recipe) and may write exports to .services/env.d/NAME.env, which .services/env sources.
  mkdir -p "$STATE/env.d"
  local script
  for script in scripts/setup.d/*.sh; do
    [ -e "$script" ] || continue
    log "set-up: $script"
    STATE_DIR="$PWD/$STATE" bash "$script"
  done
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
