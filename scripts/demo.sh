#!/usr/bin/env bash
# `make demo`: the bundled DevOps example agent, end to end, offline.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True
echo "The agent runtime is not in place yet: showing the blueprint report instead." >&2
.venv/bin/codeact --help
