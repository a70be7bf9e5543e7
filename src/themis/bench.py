"""Critic benchmarks: labelled trajectories in, metrics per critic out.

**Labels** (JSONL, one trajectory a line)::

    {"id": "calc-sum/rollout-0", "label": 1, "platform": "ubuntu",
     "rollout": "runs/r1/calc-sum/rollout-0", "instruction": "..."}

``label`` is 1 (success) or 0; ``rollout`` is a run's rollout folder, relative to the
labels file unless absolute; ``instruction`` is optional (else the run's ``task.json``
beside the rollout is read). ``labels_from_run`` writes such lines for a run whose rollouts
were scored by their evaluators.

**Predictions** (verdicts recorded elsewhere, e.g. released by a published judge): JSONL
lines ``{"id": ..., "prediction": 0|1}`` (``reward`` or ``verdict`` also name the value) or
one JSON object ``{"<id>": 0|1, ...}``. Besides 0/1 and booleans, the words judges print
are read: ``completed``/``success``/``true``/``yes``/``pass`` are 1, ``not_completed``/
``failure``/``failed``/``fail``/``false``/``no`` are 0. They are scored against the same
labels; a labelled trajectory without a prediction counts as rejected (0) and is listed
under ``missing``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.trajectory import RolloutDir, RunLayout, TaskDir

from .critics import Critic
from .grading import grade_many
from .metrics import Scores, score_by_platform
from .view import TaskInfo

__all__ = [
    "BenchResult",
    "LabelEntry",
    "bench_critic",
    "labels_from_run",
    "load_labels",
    "load_predictions",
    "render_table",
    "results_json",
    "score_predictions",
]


#: Words published judges use for their verdicts, read as 1 or 0 in prediction files.
_WORDS = {"completed": 1, "success": 1, "successful": 1, "true": 1, "yes": 1, "pass": 1,
          "not_completed": 0, "failure": 0, "failed": 0, "fail": 0, "false": 0, "no": 0}
#: Keys of a JSONL prediction line that may hold the verdict, in order of preference.
_PREDICTION_KEYS = ("prediction", "reward", "verdict")


def _binary(value: object) -> object:
    if isinstance(value, str) and value.strip().lower() in _WORDS:
        return _WORDS[value.strip().lower()]
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value in (0.0, 1.0):
        return int(value)
    return value


class LabelEntry(BaseModel):
    """One labelled trajectory."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    id: str = Field(min_length=1)
    label: Literal[0, 1]
    platform: str = "ubuntu"
    rollout: str | None = None
    """Rollout folder; needed to run a critic, not to score predictions."""
    instruction: str | None = None

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: object) -> object:
        return _binary(value)

    @field_validator("platform")
    @classmethod
    def _not_overall(cls, value: str) -> str:
        if value == "overall":
            raise ValueError("'overall' is reserved for the whole set; name the platform differently")
        return value


class BenchResult(BaseModel):
    """One critic (or prediction file) scored on a labelled set."""

    name: str
    scores: dict[str, Scores]
    """``overall`` and one entry per platform."""
    predictions: dict[str, int]
    missing: list[str] = Field(default_factory=list)
    """Labelled ids with no prediction (counted as 0)."""
    errors: dict[str, str] = Field(default_factory=dict)
    """Ids whose grading failed, and why (counted as 0)."""


def load_labels(path: Path | str) -> list[LabelEntry]:
    """Read a labels JSONL file; rollout paths become absolute. Errors name file and line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"labels file {path} does not exist: give a JSONL file of labelled trajectories") from None
    out: list[LabelEntry] = []
    seen: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = LabelEntry.model_validate_json(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            raise ValueError(f"{path}:{number}: {where}: {first['msg']}") from None
        if entry.id in seen:
            raise ValueError(f"{path}:{number}: id {entry.id!r} is labelled twice")
        seen.add(entry.id)
        if entry.rollout is not None and not Path(entry.rollout).is_absolute():
            entry = entry.model_copy(update={"rollout": str((path.parent / entry.rollout).resolve())})
        out.append(entry)
    return out


def load_predictions(path: Path | str) -> dict[str, int]:
    """Read predictions (JSONL lines or one JSON object); see the module docstring."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"predictions file {path} does not exist") from None
    pairs: list[tuple[str, object, str]] = []
    stripped = text.strip()
    try:
        whole = json.loads(stripped) if stripped.startswith("{") else None
    except json.JSONDecodeError:
        whole = None  # several JSONL lines starting with "{"
    if isinstance(whole, dict) and "id" not in whole:
        pairs = [(str(k), v, f"{path}: {k}") for k, v in whole.items()]
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                key = next(k for k in _PREDICTION_KEYS if k in obj)
                pairs.append((str(obj["id"]), obj[key], f"{path}:{number}"))
            except (json.JSONDecodeError, KeyError, TypeError, StopIteration):
                raise ValueError(f"{path}:{number}: expected {{\"id\": ..., \"prediction\": 0 or 1}}") from None
    out: dict[str, int] = {}
    for key, value, where in pairs:
        value = _binary(value)
        if value not in (0, 1) or isinstance(value, float):
            raise ValueError(f"{where}: prediction must be 0 or 1, not {value!r}")
        out[key] = int(value)  # type: ignore[call-overload]
    return out


def score_predictions(name: str, labels: Sequence[LabelEntry], predictions: Mapping[str, int], *,
                      errors: Mapping[str, str] | None = None,
                      undefined: float | None = None) -> BenchResult:
    """Score 0/1 predictions by id against the labels (unlabelled ids are ignored)."""
    errors = dict(errors or {})
    missing = [e.id for e in labels if e.id not in predictions and e.id not in errors]
    triples = [(e.label, predictions.get(e.id, 0), e.platform) for e in labels]
    return BenchResult(name=name, scores=score_by_platform(triples, undefined=undefined),
                       predictions={e.id: predictions[e.id] for e in labels if e.id in predictions},
                       missing=missing, errors=errors)


def _task_for(entry: LabelEntry, rollout: RolloutDir) -> TaskInfo:
    if entry.instruction:
        return TaskInfo(instruction=entry.instruction, task_id=entry.id, platform=entry.platform)
    task = TaskDir(rollout.path.parent, rollout.task_id).read_task()
    if task is None:
        raise FileNotFoundError(f"{entry.id}: no instruction in the labels and no task.json beside {rollout.path}")
    return TaskInfo(instruction=task.instruction, task_id=task.id, platform=entry.platform)


def _rollout_dir(path: Path) -> RolloutDir:
    index = path.name.rsplit("-", 1)[-1]
    return RolloutDir(path, path.parent.name, int(index) if index.isdigit() else 0)


async def bench_critic(critic: Critic, labels: Sequence[LabelEntry], *, concurrency: int = 4,
                       save: bool = True, reuse: bool = True, undefined: float | None = None,
                       name: str | None = None) -> BenchResult:
    """Run `critic` on every labelled rollout and score it (as `name`, by default the
    critic's). Failed gradings count as 0 and are listed under ``errors``."""
    errors: dict[str, str] = {}
    items = []
    for entry in labels:
        if entry.rollout is None:
            errors[entry.id] = "no rollout folder in the labels"
            continue
        rollout = _rollout_dir(Path(entry.rollout))
        try:
            items.append((entry.id, _task_for(entry, rollout), rollout))
        except (OSError, ValueError) as exc:
            errors[entry.id] = str(exc)
    graded = await grade_many(critic, items, concurrency=concurrency, save=save, reuse=reuse)
    predictions = {}
    for g in graded:
        if g.verdict is None:
            errors[g.key] = g.error or "grading failed"
        else:
            predictions[g.key] = g.verdict.reward
    return score_predictions(name or critic.name, labels, predictions, errors=errors, undefined=undefined)


def labels_from_run(run: RunLayout, *, platform: str | None = None, threshold: float = 1.0) -> list[LabelEntry]:
    """Labels for every evaluated rollout of a run: 1 when its score reaches `threshold`.

    Ids are ``<run_id>/<task_id>/rollout-<k>`` so that labels of several runs can share a file.
    """
    out = []
    for task_id in run.task_ids():
        task_dir = run.task(task_id)
        task = task_dir.read_task()
        for k, info in task_dir.headers().items():
            if info is None or info.score is None:
                continue
            out.append(LabelEntry(
                id=f"{run.run_id}/{task_id}/rollout-{k}",
                label=1 if info.score >= threshold - 1e-9 else 0,
                platform=platform or (task.platform if task is not None else "ubuntu"),
                rollout=str(task_dir.rollout(k).path.resolve()),
                instruction=task.instruction if task is not None else None,
            ))
    return out


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}"


def render_table(results: Sequence[BenchResult], *, platforms: bool = True) -> str:
    """A plain-text table: one row per critic and group, metrics in percent."""
    header = ["critic", "group", "n", "pos", "pred", "acc", "prec", "rec", "f1"]
    rows = [header]
    for result in results:
        for group, s in result.scores.items():
            if group != "overall" and not platforms:
                continue
            rows.append([result.name, group, str(s.n), str(s.positives), str(s.predicted), _pct(s.accuracy),
                         _pct(s.precision), _pct(s.recall), _pct(s.f1)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"{r.name}: {len(r.missing)} without prediction, {len(r.errors)} failed (counted as 0)"
             for r in results if r.missing or r.errors]
    return "\n".join(lines + notes)


def results_json(results: Sequence[BenchResult]) -> dict[str, object]:
    """Everything the table shows, plus predictions, missing ids and errors, for ``--json``."""
    return {r.name: r.model_dump(mode="json") for r in results}
