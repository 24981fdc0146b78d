#!/usr/bin/env bash
# `make demo-local`: pull a local code model (hash-checked, cached) and run the DevOps example on it,
# the model's reply streamed as it is generated. LOCAL_MODEL picks the model (default the 1.5B);
# CODEACT_LOCAL_THREADS caps llama.cpp's threads (default: the cores this process may use).
set -euo pipefail
cd "$(dirname "$0")/.."
export LITELLM_LOCAL_MODEL_COST_MAP=True
MODEL="${LOCAL_MODEL:-qwen2.5-coder-1.5b}"
CODEACT=.venv/bin/codeact
mkdir -p .demo

echo "== codeact models pull $MODEL"
$CODEACT models pull "$MODEL"
cat > .demo/devops-local.yaml <<YAML
version: codeact.agent/v1
extend: "$PWD/examples/devops/agent.yaml"
id: devops-local
model: {provider: local, model: $MODEL, options: {temperature: 0, maxOutputTokens: 512}}
YAML
echo
echo "== codeact run examples/devops/agent.yaml --model local/$MODEL (temperature 0; a round takes 10-60 s here)"
$CODEACT run .demo/devops-local.yaml --toolkit examples/devops/toolkit.py:DevOps --json \
  --store "sqlite:///$PWD/.demo/sessions.db" --session "local-$(date +%Y%m%d-%H%M%S)" \
  --input "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API." \
  | .venv/bin/python scripts/demo_local_view.py
