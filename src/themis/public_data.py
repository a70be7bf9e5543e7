"""Public reward-model data read as it is published: labels to score against, and
trajectories any critic can grade, with no conversion step.

Formats (``--format``, or detected from the path):

- ``osreward``: OSReward traces (``OS-Copilot/OSReward``'s ``eval_pipeline`` layout): one
  JSON object per trajectory with ``trace_id``, ``task_id``, ``platform``, ``instruction``
  and ``trajectory`` (steps with ``step_index``, ``screenshot_path`` relative to the file,
  ``thought``, ``action``), gold ``human_label`` SUCCESS or FAIL. Given as a folder of such
  files, one file, or a JSONL file of them. A step's screenshot is the screen *before*
  its action (``frame_semantics`` "pre"), so its after-screen is the next step's.
- ``ogrbench``: OmniGUIRewardBench / OS-Themis trajectories, a folder per trajectory
  holding ``trajectory.json``. The published file's exact schema could not be checked
  here, so the reader takes the OSReward field names and the common alternatives
  (``steps``/``history``, ``screenshot``/``image``, ``reasoning``/``think``, a label in
  ``label``/``success``/``human_label``/``reward``) and says which key it missed.
- ``agentrewardbench``: AgentRewardBench's ``annotations.csv`` (``benchmark``,
  ``model_name``, ``task_id``, ``trajectory_success`` = Successful / Unsuccessful /
  Unsure), with ``splits.csv`` (``task_id``, ``split``) beside it when present. Read as the
  benchmark's own scorer (``scripts/score_judgments.py``) reads it: the first annotation
  of a trajectory is the primary annotator's and is the label (later ones and "Unsure"
  labels are counted, not scored); a task id is looked up in splits.csv without its
  ``.resized`` / ``.improved`` suffix; WorkArena's L2 tasks are the ``workarena++``
  benchmark (the file's own value is kept as ``annotation_benchmark``). Labels keep the
  file's row order, which is the order of the scorer's released verdict vectors.
- ``mind2web``: Online-Mind2Web's ``human_label.json``: per task, one column per agent
  with "0" (failure), "1" (success) or "2" (not executable: counted, not scored).

Every field of the source is kept on the label (``model_extra``), so any of them can
group results (``--by benchmark,agent``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .bench import LabelEntry, load_labels
from .traces import STEP_LISTS, TRACE_FILE, TraceSource, first_of, trace_source

__all__ = [
    "ARB_ID_SUFFIXES",
    "FORMATS",
    "Format",
    "LabelSet",
    "TraceSource",
    "arb_benchmark",
    "arb_task_id",
    "detect_format",
    "read_labels",
    "trace_source",
]

Format = Literal["jsonl", "osreward", "ogrbench", "agentrewardbench", "mind2web"]
FORMATS: tuple[Format, ...] = ("jsonl", "osreward", "ogrbench", "agentrewardbench", "mind2web")

_INSTRUCTION_KEYS = ("instruction", "task", "goal", "confirmed_task", "task_goal")
_LABEL_KEYS = ("human_label", "label", "success", "reward", "task_success")
_MIND2WEB_META = ("task_id", "task", "confirmed_task", "website", "level", "reference_length")


@dataclass
class LabelSet:
    """Labelled trajectories read from a source, and what was left out and why."""

    entries: list[LabelEntry]
    format: Format
    skipped: dict[str, int] = field(default_factory=dict)
    """Reason -> count: e.g. ``unsure label``, ``secondary annotation``, ``not executable``."""
    notes: list[str] = field(default_factory=list)
    """What a reader should know about the labels kept (e.g. ids without a split)."""


def _label(value: object, where: str) -> int | None:
    """1, 0, or None for a label that is neither (unsure, not executable)."""
    word = str(value).strip().lower() if value is not None else ""
    if word in ("success", "successful", "1", "true", "completed", "1.0"):
        return 1
    if word in ("fail", "failure", "unsuccessful", "0", "false", "not_completed", "0.0"):
        return 0
    if word in ("unsure", "2", "", "none", "null"):
        return None
    raise ValueError(f"{where}: label {value!r} is neither success nor failure")


def _traces_in(folder: Path) -> list[Path]:
    """The trace files of a folder: its ``*.json`` but the verdicts saved beside them."""
    return [p for p in folder.glob("*.json") if ".critic-" not in p.name]


def _is_trace(file: Path) -> bool:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and any(isinstance(data.get(k), list) for k in STEP_LISTS)


def detect_format(path: Path) -> Format:
    """The format of `path`, from its layout; ValueError names the choices."""
    if path.is_dir():
        if any(path.glob(f"**/{TRACE_FILE}")):
            return "ogrbench"
        traces = _traces_in(path)
        if traces and _is_trace(traces[0]):
            return "osreward"
        raise ValueError(f"{path}: no */{TRACE_FILE} (OGRBench) or *.json traces (OSReward) inside")
    if path.suffix == ".csv":
        return "agentrewardbench"
    if path.name == TRACE_FILE:
        return "ogrbench"
    text = path.read_text(encoding="utf-8") if path.is_file() else ""
    head = text.lstrip()[:1]
    if path.suffix == ".json" and head in "[{" and text.strip():
        data = json.loads(text)
        if isinstance(data, dict) and any(k in data for k in STEP_LISTS):
            return "osreward"
        return "mind2web"
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first and any(f'"{k}"' in first for k in STEP_LISTS):
        return "osreward"
    return "jsonl"


def read_labels(path: Path | str, fmt: str | None = None) -> LabelSet:
    """The labelled set at `path` in format `fmt` (detected when None)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: give a labels file or a folder of published trajectories")
    chosen = fmt or detect_format(path)
    if chosen not in FORMATS:
        raise ValueError(f"unknown format {chosen!r}: use one of {', '.join(FORMATS)}")
    if chosen == "jsonl":
        return LabelSet(load_labels(path), "jsonl")
    if chosen == "osreward":
        return _osreward(path)
    if chosen == "ogrbench":
        return _ogrbench(path)
    if chosen == "agentrewardbench":
        return _agentrewardbench(path)
    return _mind2web(path)


def _checked(entries: list[LabelEntry], where: str) -> list[LabelEntry]:
    seen: set[str] = set()
    for e in entries:
        if e.id in seen:
            raise ValueError(f"{where}: id {e.id!r} appears twice; ids must be unique")
        seen.add(e.id)
    return entries


def _trace_entry(data: dict[str, Any], file: Path, default_id: str, skipped: dict[str, int]) -> LabelEntry | None:
    where = str(file)
    key = next((k for k in _LABEL_KEYS if k in data), None)
    if key is None:
        raise ValueError(f"{where}: no label (looked for {', '.join(_LABEL_KEYS)})")
    label = _label(data[key], f"{where}: {key}")
    if label is None:
        skipped["unsure label"] = skipped.get("unsure label", 0) + 1
        return None
    instruction = first_of(data, _INSTRUCTION_KEYS)
    extra = {k: v for k, v in data.items() if k not in (*STEP_LISTS, key, "platform", "instruction")
             and isinstance(v, str | int | float | bool)}
    ident = str(data.get("trace_id") or default_id)
    return LabelEntry.model_validate({**extra, "id": ident, "label": label, "platform": data.get("platform"),
                                      "trace": str(file.resolve()),
                                      "instruction": str(instruction) if instruction else None})


def _osreward(path: Path) -> LabelSet:
    skipped: dict[str, int] = {}
    out: list[LabelEntry] = []
    files = sorted(_traces_in(path)) if path.is_dir() else [path]
    for file in files:
        text = file.read_text(encoding="utf-8")
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}: not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{file}: an OSReward trace is one JSON object")
        entry = _trace_entry(data, file, file.stem, skipped)
        if entry is not None:
            out.append(entry)
    return LabelSet(_checked(out, str(path)), "osreward", skipped)


def _ogrbench(path: Path) -> LabelSet:
    skipped: dict[str, int] = {}
    out: list[LabelEntry] = []
    folders = [path] if (path / TRACE_FILE).is_file() else sorted(p.parent for p in path.glob(f"**/{TRACE_FILE}"))
    if path.name == TRACE_FILE:
        folders = [path.parent]
    base = path if path.is_dir() else path.parent
    for folder in folders:
        file = folder / TRACE_FILE
        data = json.loads(file.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"{file}: a trajectory is one JSON object")
        rel = folder.relative_to(base).as_posix() if folder != base else folder.name
        if "platform" not in data and folder.parent != base:
            data = {**data, "platform": folder.parent.name}  # <platform>/<trajectory>/trajectory.json
        entry = _trace_entry(data, file, rel, skipped)
        if entry is not None:
            out.append(entry)
    return LabelSet(_checked(out, str(path)), "ogrbench", skipped)


#: Suffixes AgentRewardBench's annotations carry on task ids that its splits.csv does not
#: (resized screenshots, improved task texts); its scorer drops them before the lookup.
ARB_ID_SUFFIXES = (".resized", ".improved")


def arb_task_id(task_id: str) -> str:
    """A task id as AgentRewardBench's scorer looks it up in splits.csv (suffixes removed)."""
    for suffix in ARB_ID_SUFFIXES:
        task_id = task_id.replace(suffix, "")
    return task_id


def arb_benchmark(benchmark: str, task_id: str) -> str:
    """The benchmark AgentRewardBench's scorer reports: WorkArena's L2 tasks are WorkArena++."""
    if benchmark == "workarena" and "l2" in task_id.lower():
        return "workarena++"
    return benchmark


def _agentrewardbench(path: Path) -> LabelSet:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    need = {"benchmark", "model_name", "task_id", "trajectory_success"}
    missing = need - set(rows[0] if rows else {})
    if missing:
        raise ValueError(f"{path}: not an AgentRewardBench annotations file (missing columns {', '.join(sorted(missing))})")
    splits: dict[str, str] = {}
    split_file = path.with_name("splits.csv")
    if split_file.is_file():
        with split_file.open(newline="", encoding="utf-8") as f:
            splits = {r["task_id"]: r["split"] for r in csv.DictReader(f)}
    skipped: dict[str, int] = {}
    notes: list[str] = []
    out: list[LabelEntry] = []
    seen: set[str] = set()
    unsplit: list[str] = []
    for number, row in enumerate(rows, start=2):
        ident = f"{row['benchmark']}/{row['model_name']}/{row['task_id']}"
        if ident in seen:  # the scorer's primary annotator is the first one
            skipped["secondary annotation"] = skipped.get("secondary annotation", 0) + 1
            continue
        seen.add(ident)
        label = _label(row["trajectory_success"], f"{path}:{number}: trajectory_success")
        if label is None:
            skipped["unsure label"] = skipped.get("unsure label", 0) + 1
            continue
        extra = {k: v for k, v in row.items() if k not in ("trajectory_success",) and k}
        extra["annotation_benchmark"] = row["benchmark"]
        extra["benchmark"] = arb_benchmark(row["benchmark"], row["task_id"])
        if splits:
            split = splits.get(arb_task_id(row["task_id"]))
            if split is None:
                unsplit.append(row["task_id"])
            extra["split"] = split or "—"
        out.append(LabelEntry.model_validate({**extra, "id": ident, "label": label, "agent": row["model_name"]}))
    if unsplit:
        notes.append(f"{len(unsplit)} task ids have no split in {split_file.name} (split shown as —), "
                     f"e.g. {unsplit[0]}")
    return LabelSet(out, "agentrewardbench", skipped, notes)


def _mind2web(path: Path) -> LabelSet:
    data = json.loads(path.read_text(encoding="utf-8"))
    records: list[dict[str, Any]]
    if isinstance(data, dict):
        records = [{"task_id": k, **v} for k, v in data.items() if isinstance(v, dict)]
    elif isinstance(data, list):
        records = [r for r in data if isinstance(r, dict)]
    else:
        raise ValueError(f"{path}: expected a list of tasks or an object keyed by task id")
    skipped: dict[str, int] = {}
    out: list[LabelEntry] = []
    for i, record in enumerate(records):
        task_id = record.get("task_id")
        if not task_id:
            raise ValueError(f"{path}: task {i} has no task_id")
        meta = {k: record[k] for k in _MIND2WEB_META if k in record}
        agents = {k: v for k, v in record.items() if k not in _MIND2WEB_META}
        for agent, value in agents.items():
            label = _label(value, f"{path}: task {task_id} agent {agent}")
            if label is None:
                skipped["not executable"] = skipped.get("not executable", 0) + 1
                continue
            instruction = meta.get("confirmed_task") or meta.get("task")
            out.append(LabelEntry.model_validate({**meta, "id": f"{agent}/{task_id}", "label": label,
                                                  "agent": agent, "platform": "web",
                                                  "instruction": instruction}))
    return LabelSet(_checked(out, str(path)), "mind2web", skipped)
