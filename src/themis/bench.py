"""Critic benchmarks: labelled trajectories in, metrics per critic out.

**Labels** (JSONL, one trajectory a line)::

    {"id": "calc-sum/rollout-0", "label": 1, "platform": "ubuntu",
     "rollout": "runs/r1/calc-sum/rollout-0", "instruction": "..."}

``label`` is 1 (success) or 0 (the words of published label sets are read too:
"Successful"/"Unsuccessful", "1"/"0"); ``rollout`` is a run's rollout folder, relative to
the labels file unless absolute; ``instruction`` is optional (else the run's ``task.json``
beside the rollout is read). Any other field is kept and can group the results
(``by=("benchmark", "agent")``). ``labels_from_run`` writes such lines for a run whose
rollouts were scored by their evaluators.

**Predictions** (verdicts recorded elsewhere, e.g. released by a published judge): JSONL
lines ``{"id": ..., "prediction": 0|1}`` (``reward`` or ``verdict`` also name the value) or
one JSON object ``{"<id>": 0|1, ...}``. Besides 0/1 and booleans, the words judges print
are read: ``completed``/``success``/``true``/``yes``/``pass`` are 1, ``not_completed``/
``failure``/``failed``/``fail``/``false``/``no`` are 0. ``null`` or ``-1`` is a judge that
failed on that trajectory: an error, not a rejection.

**Scoring.** Every labelled trajectory ends in one of four places: a prediction (scored),
an error (the critic failed: ``on_error="exclude"`` leaves it out of the metrics,
``"reject"`` counts it as 0), missing (no prediction: counted as 0, or left out with
``skip_missing``), or, for prediction ids that match no label, ``unmatched``. Each is
counted per group, and the table says which rule was applied.

**Groups.** ``by=("benchmark", "agent")`` scores every combination of the values seen
(one that holds no trajectory is listed as empty, never silently dropped) and the margins
(``webarena/*``: every agent on WebArena; ``*/gpt-4o``: one agent on every benchmark).
Macro averages are means over the non-empty combinations; an empty group never enters
one, whatever the rule for undefined ratios. Verdicts released by AgentRewardBench
(``results.json``, judgment folders) are read by `themis.released`.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.trajectory import RolloutDir, RunLayout, TaskDir

from .critics import Critic
from .grading import Published, grade_many
from .metrics import METRICS, Scores, score
from .rounding import Rounding
from .traces import trace_source
from .view import TaskInfo

__all__ = [
    "ALL",
    "BenchResult",
    "ErrorRule",
    "LabelEntry",
    "Undefined",
    "bench_critic",
    "group_of",
    "labels_from_run",
    "load_labels",
    "load_predictions",
    "score_predictions",
    "shown",
]

#: What an errored verdict counts as: left out of the metrics, or a rejection (0).
ErrorRule = Literal["exclude", "reject"]
#: How an undefined ratio (e.g. precision with nothing accepted) is shown and averaged:
#: ``dash`` shown as "—" and it makes a macro average undefined; ``skip`` shown as "—" and
#: left out of macro averages; ``zero`` counted as 0 (how some papers print it).
Undefined = Literal["dash", "skip", "zero"]

#: Words published judges and label sets use, read as 1 or 0.
_WORDS = {"completed": 1, "success": 1, "successful": 1, "true": 1, "yes": 1, "pass": 1, "1": 1,
          "not_completed": 0, "not completed": 0, "unsuccessful": 0, "failure": 0, "failed": 0,
          "fail": 0, "false": 0, "no": 0, "0": 0}
#: Prediction values that mean the judge failed on that trajectory.
_FAILED = {"-1", "null", "none", "error"}
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
    """One labelled trajectory; fields beyond these are kept (``model_extra``)."""

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True)

    id: str = Field(min_length=1)
    label: Literal[0, 1]
    platform: str | None = None
    rollout: str | None = None
    """Rollout folder; needed to run a critic, not to score predictions."""
    trace: str | None = None
    """A published trajectory file (OSReward trace, OGRBench ``trajectory.json``) instead."""
    instruction: str | None = None

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: object) -> object:
        return _binary(value)


#: Group names the table uses for itself.
_RESERVED = ("overall", "macro")
#: The value a margin group has in the fields it spans (``webarena/*``).
ALL = "*"
#: Characters of a value shown in an error line; a longer one is cut.
_SHOWN = 80


def shown(value: object) -> str:
    """`repr(value)`, cut to a length an error line can carry."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN - 20]}... ({len(text)} characters)"


def group_of(entry: LabelEntry, by: Sequence[str]) -> str:
    """The group an entry falls in: its values of the `by` fields joined by "/"."""
    values = []
    for name in by:
        value = getattr(entry, name, None) if name in LabelEntry.model_fields else (entry.model_extra or {}).get(name)
        values.append("—" if value is None else str(value))
    return "/".join(values)


class BenchResult(BaseModel):
    """One critic (or prediction file) scored on a labelled set."""

    name: str
    scores: dict[str, Scores]
    """``overall`` and one entry per group (combinations, then margins)."""
    macro: dict[str, float | None] = Field(default_factory=dict)
    """Each metric averaged over the non-empty combinations (when two or more)."""
    by: list[str] = Field(default_factory=lambda: ["platform"])
    on_error: ErrorRule = "exclude"
    skip_missing: bool = False
    undefined: Undefined = "dash"
    rounding: Rounding = "exact"
    leaves: list[str] = Field(default_factory=list)
    """The combinations of the grouping fields' values, empty ones included."""
    margins: list[str] = Field(default_factory=list)
    """Groups spanning every value of some fields (``webarena/*``)."""
    predictions: dict[str, int]
    missing: list[str] = Field(default_factory=list)
    """Labelled ids with no prediction."""
    errors: dict[str, str] = Field(default_factory=dict)
    """Ids whose critic failed (or whose grading raised), and why."""
    unmatched: list[str] = Field(default_factory=list)
    """Prediction ids that match no label."""
    group_errors: dict[str, int] = Field(default_factory=dict)
    group_missing: dict[str, int] = Field(default_factory=dict)


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


def load_predictions(path: Path | str) -> dict[str, int | None]:
    """Read predictions (JSONL lines or one JSON object); None marks a failed judge.

    A duplicated id is an error: which of two verdicts counts cannot be guessed."""
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
        pairs = [(str(k), v, f"{path}: {shown(k)}") for k, v in whole.items()]
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
    out: dict[str, int | None] = {}
    for key, value, where in pairs:
        if key in out:
            raise ValueError(f"{where}: id {shown(key)} has a second prediction; keep one per id")
        if value is None or (isinstance(value, int) and not isinstance(value, bool) and value == -1) \
                or (isinstance(value, str) and value.strip().lower() in _FAILED):
            out[key] = None
            continue
        value = _binary(value)
        if value not in (0, 1) or isinstance(value, float):
            raise ValueError(f"{where}: prediction must be 0 or 1 (or null for a failed judge), not {shown(value)}")
        out[key] = int(value)  # type: ignore[call-overload]
    return out


def _average(values: list[float | None], undefined: Undefined) -> float | None:
    if undefined == "dash" and any(v is None for v in values):
        return None
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


#: How many cells a cross product of group values may have before empty ones are not listed.
_MAX_CROSS = 2000


def _group_keys(keys: set[tuple[str, ...]], width: int) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """(leaf groups, margin groups). With several fields, the leaves are every combination of
    the values seen (so an empty combination is listed as such) and each margin puts `ALL`
    in some of the fields; a single field has leaves only."""
    if width == 1:
        return sorted(keys), []
    values = [sorted({k[i] for k in keys}) for i in range(width)]
    leaves = sorted(keys)
    if math.prod(len(v) for v in values) <= _MAX_CROSS:
        leaves = sorted(itertools.product(*values))
    margins: list[tuple[str, ...]] = []
    for mask in itertools.product((False, True), repeat=width):
        if all(mask) or not any(mask):
            continue
        margins += sorted({tuple(ALL if m else v for v, m in zip(key, mask, strict=True)) for key in keys})
    return leaves, margins


def _in(key: tuple[str, ...], group: tuple[str, ...]) -> bool:
    return all(g == ALL or g == k for k, g in zip(key, group, strict=True))


def score_predictions(name: str, labels: Sequence[LabelEntry], predictions: Mapping[str, int | None], *,
                      errors: Mapping[str, str] | None = None, on_error: ErrorRule = "exclude",
                      skip_missing: bool = False, by: Sequence[str] = ("platform",),
                      undefined: Undefined = "dash", rounding: Rounding = "exact") -> BenchResult:
    """Score 0/1 predictions by id against the labels; see the module docstring."""
    errors = dict(errors or {})
    for key, value in predictions.items():
        if value is None:
            errors.setdefault(key, "the judge failed (null prediction)")
    labelled = {e.id for e in labels}
    fill = 0.0 if undefined == "zero" else None
    missing: list[str] = []
    # Per label: its group key and what it counts as (a triple, an error, a missing verdict).
    rows: list[tuple[tuple[str, ...], tuple[int, int] | None, str]] = []
    for e in labels:
        where = tuple(group_of(e, [field]) for field in by)
        if "/".join(where) in _RESERVED or ALL in where:
            raise ValueError(f"{e.id}: group {'/'.join(where)!r} is a name the table uses; rename that value")
        if e.id in errors:
            rows.append((where, (int(e.label), 0) if on_error == "reject" else None, "error"))
            continue
        if e.id not in predictions:
            missing.append(e.id)
            rows.append((where, None if skip_missing else (int(e.label), 0), "missing"))
            continue
        value = predictions[e.id]
        assert value is not None
        rows.append((where, (int(e.label), value), "scored"))
    leaves, margins = _group_keys({k for k, _, _ in rows}, len(by))
    scores = {"overall": score([p for _, p, _ in rows if p is not None], undefined=fill)}
    group_errors: dict[str, int] = {}
    group_missing: dict[str, int] = {}
    for cell in sorted([*leaves, *margins], key=lambda g: tuple((v == ALL, v) for v in g)):
        inside = [(p, kind) for k, p, kind in rows if _in(k, cell)]
        label = "/".join(cell)
        scores[label] = score([p for p, _ in inside if p is not None], undefined=fill)
        if (n := sum(kind == "error" for _, kind in inside)):
            group_errors[label] = n
        if (n := sum(kind == "missing" for _, kind in inside)):
            group_missing[label] = n
    filled = ["/".join(g) for g in leaves if scores["/".join(g)].n > 0]  # empty groups stay out
    macro: dict[str, float | None] = {}
    if len(filled) > 1:
        for metric in METRICS:
            macro[metric] = _average([getattr(scores[g], metric) for g in filled], undefined)
    return BenchResult(name=name, scores=scores, macro=macro, by=list(by), on_error=on_error,
                       skip_missing=skip_missing, undefined=undefined, rounding=rounding,
                       leaves=["/".join(g) for g in leaves], margins=["/".join(g) for g in margins],
                       predictions={e.id: v for e in labels if (v := predictions.get(e.id)) is not None},
                       missing=missing, errors={k: v for k, v in errors.items() if k in labelled},
                       unmatched=sorted(k for k in predictions if k not in labelled),
                       group_errors=group_errors, group_missing=group_missing)


def _task_for(entry: LabelEntry, rollout: RolloutDir) -> TaskInfo:
    if entry.instruction:
        return TaskInfo(instruction=entry.instruction, task_id=entry.id, platform=entry.platform)
    task = TaskDir(rollout.path.parent, rollout.task_id).read_task()
    if task is None:
        raise FileNotFoundError(f"{entry.id}: no instruction in the labels and no task.json beside {rollout.path}")
    return TaskInfo(instruction=task.instruction, task_id=task.id, platform=entry.platform or task.platform)


def _trace_task(entry: LabelEntry) -> TaskInfo:
    if not entry.instruction:
        raise ValueError(f"{entry.id}: the trace names no instruction to grade against")
    return TaskInfo(instruction=entry.instruction, task_id=entry.id, platform=entry.platform)


def _rollout_dir(path: Path) -> RolloutDir:
    index = path.name.rsplit("-", 1)[-1]
    return RolloutDir(path, path.parent.name, int(index) if index.isdigit() else 0)


async def bench_critic(critic: Critic, labels: Sequence[LabelEntry], *, concurrency: int = 4,
                       save: bool = True, reuse: bool = True, on_error: ErrorRule = "exclude",
                       skip_missing: bool = False, by: Sequence[str] = ("platform",),
                       undefined: Undefined = "dash", rounding: Rounding = "exact",
                       name: str | None = None) -> BenchResult:
    """Run `critic` on every labelled rollout and score it (as `name`, by default the
    critic's). A verdict with an error, or a grading that raised, is listed under
    ``errors`` and scored by `on_error`; saved verdicts with an error are graded again."""
    errors: dict[str, str] = {}
    items: list[tuple[str, TaskInfo, RolloutDir | Published]] = []
    for entry in labels:
        if entry.trace is not None:
            try:
                items.append((entry.id, _trace_task(entry), Published(trace_source(entry.trace), Path(entry.trace))))
            except (OSError, ValueError) as exc:
                errors[entry.id] = str(exc)
            continue
        if entry.rollout is None:
            errors[entry.id] = "no rollout folder or trace in the labels"
            continue
        rollout = _rollout_dir(Path(entry.rollout))
        try:
            items.append((entry.id, _task_for(entry, rollout), rollout))
        except (OSError, ValueError) as exc:
            errors[entry.id] = str(exc)
    graded = await grade_many(critic, items, concurrency=concurrency, save=save, reuse=reuse)
    predictions: dict[str, int | None] = {}
    for g in graded:
        if g.verdict is None or g.verdict.reward is None:
            errors[g.key] = g.failure or "grading failed"
        else:
            predictions[g.key] = g.verdict.reward
    return score_predictions(name or critic.name, labels, predictions, errors=errors, on_error=on_error,
                             skip_missing=skip_missing, by=by, undefined=undefined, rounding=rounding)


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
                platform=platform or (task.platform if task is not None else None),
                rollout=str(task_dir.rollout(k).path.resolve()),
                instruction=task.instruction if task is not None else None,
            ))
    return out
