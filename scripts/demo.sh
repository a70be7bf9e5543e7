#!/usr/bin/env bash
# The whole pipeline on local desktops for one local-suite task: set-up, N desktops (3 by
# default) reverted to the task's snapshot, N rollouts of the Agent S3 worker in parallel with
# live progress, behavior narratives while they run, one Behavior Judge pick, the task's
# evaluator, the run folder and its report.html. With OPENAI_API_KEY (or ANTHROPIC_API_KEY) it uses that provider's model;
# without a key it uses the scripted demo policy, and says so.
#
#   bash scripts/demo.sh                      # mousepad-append-line, 3 rollouts
#   DEMO_ROLLOUTS=1 bash scripts/demo.sh      # a single rollout, no judge
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
rollouts="${DEMO_ROLLOUTS:-3}"
judge=bjudge
[ "$rollouts" -gt 1 ] || judge=none
exec .venv/bin/agent-s3 run --task "$task" --model "$model" --rollouts "$rollouts" --judge "$judge" \
  --out "${DEMO_OUT:-runs}" "$@"
