"""Resuming a benchmark run: what it was asked to do, what is finished, what to redo.

A benchmark run's root holds ``bench.json`` (`BenchManifest`): the command's identity (the
settings that change results), each task's domain and the tasks skipped as unsupported.
Re-running a command whose ``--out``/``--run-id`` names an existing run resumes it; an
identity that differs is one `ResumeMismatch` naming the settings that changed. How a
model is reached (base URL, key, timeout, connections) is not part of the identity.

The unit of resumption is the rollout (an environment's state cannot be restored mid-way):
a rollout whose header is terminal and, for a task with an evaluator, scored is kept; one
still ``running``, never started, ended by the world, or ended unscored is redone from the
task's snapshot (so a task whose setup or scorer failed is tried again). `ResumingWide` is
wide scaling that keeps finished rollouts and tells their narratives again from the fact
cache (no model call) before the judge.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from pydantic import BaseModel, Field

from bjudge.representations import narrate_rollout
from core.atomic import write_json_atomic
from core.trajectory import (
    AGENT_OUTCOMES,
    RolloutDir,
    RolloutInfo,
    RunFolderError,
    RunLayout,
    Task,
    TaskResult,
    load_record,
    plan_resume,
    rollout_errors,
)

from .models import ModelSet
from .narration import LiveNarrator
from .outcomes import RolloutResult
from .run_log import RUN_LOG
from .strategy import RolloutOutcome, TaskRun
from .wide import WideScaling

__all__ = [
    "MANIFEST_FILE",
    "BenchManifest",
    "ResumeMismatch",
    "ResumingWide",
    "check_resume",
    "identity_of",
    "outcome_from_header",
    "pending_rollouts",
    "read_manifest",
    "single_result",
    "task_finished",
    "write_manifest",
]

MANIFEST_FILE = "bench.json"
#: Keys that say how a model is reached rather than what it is, or how many desktops run at
#: once; they may change on resume.
_REACH = frozenset({"base_url", "api_key", "token", "timeout", "max_connections", "desktop_memory_mib",
                    "desktops_per_core", "spare"})


class ResumeMismatch(ValueError):
    """The resumed command differs from the run's; the message names what changed."""


class BenchManifest(BaseModel):
    """``bench.json``: what a benchmark run was asked to do."""

    schema_version: int = 1
    suite: str
    identity: dict[str, Any]
    domains: dict[str, str] = Field(default_factory=dict)
    """Domain of each task run, by task id (task lists are grouped by domain)."""
    skipped: dict[str, list[str]] = Field(default_factory=dict)
    """Tasks left out because this runner cannot set them up or evaluate them: their gaps."""
    seed: int
    """Base seed of the rollouts (drawn once, kept on resume so slots keep their models)."""
    created_at: float = Field(default_factory=time.time)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if k not in _REACH}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def identity_of(config: dict[str, Any], **command: Any) -> dict[str, Any]:
    """The settings that decide a run's results: the command's own options and the run
    configuration without paths, labels, the worker (filled from the environment) and
    the ways models are reached."""
    shown = {k: v for k, v in config.items() if k not in ("run_id", "out_dir", "label", "worker")}
    return _strip({"command": command, "config": shown})


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    return [] if old == new else [f"{path} (was {old!r}, now {new!r})"]


def read_manifest(layout: RunLayout) -> BenchManifest | None:
    path = layout.path / MANIFEST_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return load_record(path, BenchManifest, data)


def write_manifest(layout: RunLayout, manifest: BenchManifest) -> None:
    layout.create()
    write_json_atomic(layout.path / MANIFEST_FILE, manifest, durable=layout.durable)


def check_resume(layout: RunLayout, suite: str, identity: dict[str, Any]) -> BenchManifest | None:
    """The existing run's manifest when `layout` is resumable by this command (None: a new
    run). Raises `ResumeMismatch` when the run exists but was made by another command."""
    manifest = read_manifest(layout)
    if manifest is None:
        if layout.path.is_dir() and any(p.name != RUN_LOG for p in layout.path.iterdir()):  # a log alone is no run
            raise ResumeMismatch(f"{layout.path} exists but is not a benchmark run: pass another --run-id")
        return None
    changes = ([f"suite (was {manifest.suite!r}, now {suite!r})"] if manifest.suite != suite else [])
    changes += _diff(manifest.identity, identity)
    if changes:
        shown = "; ".join(changes[:4]) + (f"; and {len(changes) - 4} more" if len(changes) > 4 else "")
        raise ResumeMismatch(f"run {layout.run_id} was made with other settings: {shown}. "
                             "Re-run with the original settings, or pass another --run-id")
    return manifest


def _kept(info: RolloutInfo | None, task: Task) -> bool:
    if info is None or not info.finished:
        return False
    if info.status in AGENT_OUTCOMES and task.evaluator and info.score is None:
        return False  # killed between the rollout's end and its evaluation
    return info.status != "setup_failed"  # not set up yet: try again (a failed scorer is redone above)


def _whole_header(rd: RolloutDir) -> RolloutInfo | None:
    """The header of a rollout whose files are whole; None (redo it) when they are damaged."""
    try:
        info = rd.read_info()
        rd.check_complete()
    except RunFolderError:
        return None  # plan_resume has said why
    return info


def pending_rollouts(layout: RunLayout, task: Task, n: int) -> list[int]:
    """Rollouts 0..n-1 of `task` that must (still) run: not started, interrupted, lost to
    the world, or never evaluated."""
    plan = plan_resume(layout, [task.id], n, redo_world_failures=True)[task.id]
    task_dir = layout.task(task.id)
    return sorted(plan.redo + [k for k in plan.finished if not _kept(task_dir.rollout(k).read_info(), task)])


def task_finished(layout: RunLayout, task: Task, n: int) -> bool:
    """Whether `task` has its result and every one of its n rollouts is kept."""
    return layout.task(task.id).read_result() is not None and not pending_rollouts(layout, task, n)


def outcome_from_header(k: int, info: RolloutInfo) -> RolloutOutcome:
    """A finished rollout's outcome as its header recorded it."""
    seconds = (info.ended_at - info.started_at) if info.ended_at is not None else 0.0
    result = RolloutResult(info.status, info.reason or "", info.step_count, None, seconds, 0.0)
    why = info.reason if info.status == "setup_failed" else info.score_error
    return RolloutOutcome(k, result, info.score, why)


def single_result(layout: RunLayout, task: Task) -> TaskResult | None:
    """The result of a one-rollout task whose rollout 0 is kept (None: it must run)."""
    if pending_rollouts(layout, task, 1):
        return None
    info = layout.task(task.id).rollout(0).read_info()
    assert info is not None
    return TaskResult.from_scores(task.id, {0: info.score}, selected=0, errors=rollout_errors({0: info}))


class ResumingWide(WideScaling):
    """Wide scaling that keeps the rollouts a previous attempt of the run finished (their
    facts come from the fact cache), runs the others, then judges them all."""

    name = "wide"

    async def _rollout(self, run: TaskRun, slot: Any, models: ModelSet,
                       narrator: LiveNarrator | None) -> RolloutOutcome:
        k = slot.index
        rd = run.layout.rollout(run.task.id, k)
        info = await asyncio.to_thread(_whole_header, rd)
        if not _kept(info, run.task):
            return await super()._rollout(run, slot, models, narrator)
        assert info is not None
        self._tell(run.task.id, k, info.status, info.model, info.attempts)
        if narrator is not None and info.status in AGENT_OUTCOMES:
            await narrate_rollout(narrator.builder, rd)
        return outcome_from_header(k, info)
