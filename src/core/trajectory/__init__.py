"""Records of a run and their on-disk layout.

Records are versioned pydantic models (`Task`, `Step`, `RolloutInfo`, `Trajectory`,
`Narrative`, `Selection`, `TaskResult`; model calls are `core.llm.records.CallRecord`).
`RunLayout` computes a run's paths and writes them atomically::

    layout = RunLayout("runs", run_id)
    rd = layout.rollout(task.id, k)
    rd.start(RolloutInfo(run_id=..., task_id=task.id, rollout=k, model=..., started_at=time.time()))
    rd.append_step(step, screenshots={"before": png, "after": png})
    rd.finish("done")

Readers are lazy: `RunLayout.headers` reads headers only, `RolloutDir.read_step` parses
one line, `RolloutDir.iter_steps` one step at a time; `plan_resume` says what to redo.
"""

from .base import Record, RunFolderError, load_record
from .judging import Narrative, RolloutError, Selection, TaskResult, rollout_error, rollout_errors
from .layout import RunLayout, TaskDir
from .names import SCREENSHOT_ROLES, check_name, screenshot_name, step_image_name
from .osworld import Evaluator, GetterSpec, MetricCall, SetupStep
from .resume import ResumePlan, plan_resume
from .rollout import (
    AGENT_OUTCOMES,
    TASK_ERRORS,
    TERMINAL_STATUSES,
    WORLD_FAILURES,
    RolloutInfo,
    RolloutStatus,
    Trajectory,
)
from .rollout_dir import RolloutDir
from .step import PointerEvent, Step, StepTimings
from .task import Platform, Task

__all__ = [
    "AGENT_OUTCOMES",
    "SCREENSHOT_ROLES",
    "TASK_ERRORS",
    "TERMINAL_STATUSES",
    "WORLD_FAILURES",
    "Evaluator",
    "GetterSpec",
    "MetricCall",
    "Narrative",
    "Platform",
    "PointerEvent",
    "Record",
    "ResumePlan",
    "RolloutDir",
    "RolloutError",
    "RolloutInfo",
    "RolloutStatus",
    "RunFolderError",
    "RunLayout",
    "Selection",
    "SetupStep",
    "Step",
    "StepTimings",
    "Task",
    "TaskDir",
    "TaskResult",
    "Trajectory",
    "check_name",
    "load_record",
    "plan_resume",
    "rollout_error",
    "rollout_errors",
    "screenshot_name",
    "step_image_name",
]
