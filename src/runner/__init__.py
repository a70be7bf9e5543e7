"""Rollouts, scaling strategies, executors and reports (the orchestration), and the
`agent-s3` command line in `runner.cli`, which only it imports.

One rollout::

    rollout = Rollout(env=env, worker=worker, instruction=task.instruction,
                      rollout_dir=layout.rollout(task.id, 0), info=info, config=cfg.rollout,
                      hooks=[narrate])
    result = await rollout.run()          # RolloutResult(status, reason, steps, ...)

A task under a strategy: ``await SingleRollout()(TaskRun(task, layout, cfg, pool, models,
ledger, hooks))`` writes ``result.json``; `run_rollout` is the piece wider strategies reuse.
"""

from .config import ModelConfig, RolloutConfig, RunConfig, load_run_config
from .demo_policy import DEMO_MODEL, DEMO_PLANS, PlannedReplies, register_demo, role_of
from .environments import EnvironmentPool, FixedPool, open_pool
from .models import ModelSet, build_models, make_worker, settled_config, spent_by, worker_config
from .outcomes import (
    CostLimit,
    Done,
    EnvironmentGone,
    Errored,
    Failed,
    RepeatedFormat,
    RolloutEnd,
    RolloutResult,
    StepLimit,
)
from .rollout import Rollout, StepEvent, StepHook
from .strategies import STRATEGIES
from .strategy import RolloutOutcome, SingleRollout, Strategy, TaskRun, run_rollout, run_tasks
from .tasks import resolve_task

__all__ = [
    "DEMO_MODEL",
    "DEMO_PLANS",
    "STRATEGIES",
    "CostLimit",
    "Done",
    "EnvironmentGone",
    "EnvironmentPool",
    "Errored",
    "Failed",
    "FixedPool",
    "ModelConfig",
    "ModelSet",
    "PlannedReplies",
    "RepeatedFormat",
    "Rollout",
    "RolloutConfig",
    "RolloutEnd",
    "RolloutOutcome",
    "RolloutResult",
    "RunConfig",
    "SingleRollout",
    "StepEvent",
    "StepHook",
    "StepLimit",
    "Strategy",
    "TaskRun",
    "build_models",
    "load_run_config",
    "make_worker",
    "open_pool",
    "register_demo",
    "resolve_task",
    "role_of",
    "run_rollout",
    "run_tasks",
    "settled_config",
    "spent_by",
    "worker_config",
]
