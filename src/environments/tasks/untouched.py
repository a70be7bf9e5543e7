"""A task set up and scored on an environment with nobody acting: does it set up, does it score, and
what does doing nothing score?

The environment-level check behind the sample tests and the survey over OSWorld's task files
(`scripts/untouched_check.py`): for one task on one `Environment`, `check_untouched` runs
its setup (`prepare_task`, which reverts first), then its evaluator on the untouched state
as if the agent had answered ``done`` (and, for an ``infeasible`` task, also ``fail``).
Every failure is an outcome with its cause in one line, never a score. A task whose
untouched state scores 1 is flagged: here, something the task should make the agent do is
already done (a known difference from OSWorld's image, `differences`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from core.protocols import EnvError, Environment, EnvironmentLost
from core.trajectory import Task

__all__ = ["UntouchedCheck", "check_untouched"]

Outcome = Literal["scored", "setup_failed", "scoring_failed", "environment_lost"]


@dataclass
class UntouchedCheck:
    """What one task did on an untouched desktop."""

    task_id: str
    outcome: Outcome
    #: The evaluator's score with the agent answering ``done`` (None unless scored).
    score: float | None = None
    #: For an ``infeasible`` task, its score when the agent answers ``fail`` (OSWorld's FAIL).
    fail_score: float | None = None
    #: One line: why setup or scoring failed.
    cause: str = ""
    #: Setup commands that ran but exited non-zero (OSWorld's controller goes on past them).
    setup_warnings: list[str] = field(default_factory=list)
    setup_seconds: float = 0.0
    score_seconds: float = 0.0

    @property
    def flagged(self) -> bool:
        """Doing nothing already scores 1: the task cannot tell a solved desktop from this one."""
        return self.score is not None and self.score >= 1.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"flagged": self.flagged}


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:400]


async def check_untouched(env: Environment, task: Task, cache_dir: Path) -> UntouchedCheck:
    """Set `task` up on `env` and score it untouched (see the module)."""
    started = time.monotonic()
    try:
        await env.prepare_task(task, cache_dir)
    except EnvironmentLost as exc:
        return UntouchedCheck(task.id, "environment_lost", cause=_line(exc), setup_seconds=time.monotonic() - started)
    except (EnvError, OSError, ValueError, TimeoutError) as exc:
        return UntouchedCheck(task.id, "setup_failed", cause=_line(exc), setup_seconds=time.monotonic() - started)
    setup_seconds = time.monotonic() - started
    warnings = list(getattr(env, "last_setup_warnings", []))
    started = time.monotonic()
    infeasible = [c.get("func") for c in _calls(task)] == ["infeasible"]
    try:
        score = await env.score_task(task, cache_dir, last_action=None)
        fail_score = await env.score_task(task, cache_dir, last_action="fail") if infeasible else None
    except EnvironmentLost as exc:
        return UntouchedCheck(task.id, "environment_lost", cause=_line(exc), setup_warnings=warnings,
                              setup_seconds=setup_seconds, score_seconds=time.monotonic() - started)  # fmt: skip
    except Exception as exc:  # a crashed getter or metric: an outcome of its own, never a score
        return UntouchedCheck(task.id, "scoring_failed", cause=_line(exc), setup_warnings=warnings,
                              setup_seconds=setup_seconds, score_seconds=time.monotonic() - started)  # fmt: skip
    return UntouchedCheck(
        task.id, "scored", score=score, fail_score=fail_score, setup_warnings=warnings,
        setup_seconds=setup_seconds, score_seconds=time.monotonic() - started,
    )  # fmt: skip


def _calls(task: Task) -> list[dict[str, Any]]:
    evaluator = task.evaluator or {}
    funcs = evaluator.get("func")
    return [{"func": f} for f in (funcs if isinstance(funcs, list) else [funcs])]
