#!/usr/bin/env bash
# The whole pipeline on a local desktop for one local-suite task: set-up, a desktop, the
# task's setup, one rollout of the Agent S3 worker with live progress, the task's evaluator,
# the run folder. With OPENAI_API_KEY (or ANTHROPIC_API_KEY) it uses that provider's model;
# without a key it uses the scripted demo policy, and says so.
#
#   bash scripts/demo.sh                      # mousepad-append-line
#   DEMO_TASK=terminal-rename-extension bash scripts/demo.sh   # with the coding agent
#   DEMO_MODEL=openai/gpt-5-mini bash scripts/demo.sh -c rollout.max_steps=20
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

task="${DEMO_TASK:-mousepad-append-line}"
if [ -n "${DEMO_MODEL:-}" ]; then
  model="$DEMO_MODEL"
elif [ -n "${OPENAI_API_KEY:-}" ]; then
  model="openai/gpt-5"
elif [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  model="anthropic/claude-sonnet-4-5"
else
  model="scripted/demo"
fi
if [ "${model%%/*}" = "scripted" ]; then
  echo "demo: no OPENAI_API_KEY or ANTHROPIC_API_KEY is set, so the policy is SCRIPTED:"
  echo "demo: its replies are a fixed plan for $task, not a model's; everything else runs for real."
fi
exec .venv/bin/agent-s3 run --task "$task" --model "$model" --out "${DEMO_OUT:-runs}" "$@"
