#!/usr/bin/env bash
# `make demo`: the bundled DevOps example agent, end to end and offline, then its replay.
# The model is scripted (examples/devops/replies.yaml); the session is recorded in a SQLite store
# under .demo/ and replayed from that record in a fresh sandbox.
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True
mkdir -p .demo
STORE="sqlite:///$PWD/.demo/sessions.db"
SESSION="demo-$(date +%Y%m%d-%H%M%S)"
CODEACT=.venv/bin/codeact

echo "== codeact validate examples/devops/agent.yaml"
$CODEACT validate examples/devops/agent.yaml
echo
echo "== codeact run (session $SESSION)"
$CODEACT run examples/devops/agent.yaml --toolkit examples/devops/toolkit.py:DevOps \
  --store "$STORE" --session "$SESSION" \
  --input "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."
echo
echo "== codeact replay $SESSION (answers tool calls from the record; no model, no live tools)"
$CODEACT replay "$SESSION" --store "$STORE" --toolkit examples/devops/toolkit.py:DevOps
echo
echo "Inspect it: $CODEACT sessions show $SESSION --store $STORE"
