"""Export a run in OSWorld's results layout, for submissions and OSWorld's own tools.

One folder per task, ``<root>/<action_space>/<observation_type>/<model>/<domain>/<id>/``,
holding the *selected* rollout (the only one when a task has one): ``traj.jsonl`` (one
line per action: ``step_num``, ``action``, ``response``, ``screenshot_file`` naming the
screen after it), ``step_0.png`` (the first screen), ``step_<n>.png``, ``result.txt``
(the evaluator's score) and ``instruction.txt``. Control actions are written as OSWorld
writes them (``DONE``, ``FAIL``, ``WAIT``); others as the code that was run, else the
action's JSON. A task without a pick or a score is left out and named in the report.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from core.atomic import write_text_atomic
from core.trajectory import RolloutDir, RunLayout, Step

__all__ = ["ExportReport", "export_osworld"]

_CONTROL = {"done": "DONE", "fail": "FAIL", "wait": "WAIT"}


@dataclass
class ExportReport:
    """Folders written by task id, and tasks left out with why."""

    written: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def _action_text(step: Step) -> str:
    kind = (step.action or {}).get("kind")
    if isinstance(kind, str) and kind in _CONTROL:
        return _CONTROL[kind]
    if step.code:
        return step.code
    return json.dumps(step.action or {}, sort_keys=True)


def _write_rollout(rd: RolloutDir, folder: Path, instruction: str, score: float) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    lines: list[str] = []
    last_shot: Path | None = None
    for n, step in enumerate(rd.iter_steps(), start=1):
        if n == 1 and step.before_screenshot:
            first = rd.screenshot_path(step.before_screenshot)
            if first.is_file():
                shutil.copyfile(first, folder / "step_0.png")
                last_shot = first
        shot = rd.screenshot_path(step.after_screenshot) if step.after_screenshot else None
        if shot is None or not shot.is_file():
            shot = last_shot  # an action that took no screenshot (e.g. DONE): the screen is unchanged
        if shot is None:
            break
        name = f"step_{n}.png"
        shutil.copyfile(shot, folder / name)
        last_shot = shot
        line = {"step_num": n, "action": _action_text(step), "response": step.thought, "screenshot_file": name}
        if step.code and line["action"] != step.code:
            line["exec_code"] = step.code
        lines.append(json.dumps(line, ensure_ascii=False))
    write_text_atomic(folder / "traj.jsonl", "".join(x + "\n" for x in lines))
    write_text_atomic(folder / "result.txt", f"{score}\n")
    write_text_atomic(folder / "instruction.txt", instruction)


def export_osworld(layout: RunLayout, root: Path, *, domains: dict[str, str] | None = None,
                   model: str | None = None, action_space: str = "pyautogui",
                   observation_type: str = "screenshot") -> ExportReport:
    """Write each task's selected rollout of `layout` under `root` (blocking). `model`
    names the folder (default: the selected rollout's policy model, its provider dropped)."""
    report = ExportReport()
    domains = domains or {}
    for task_id in layout.task_ids():
        task_dir = layout.task(task_id)
        result, task = task_dir.read_result(), task_dir.read_task()
        if result is None or task is None:
            report.skipped[task_id] = "no result.json or task.json (unfinished)"
            continue
        k = result.selected if result.selected is not None else (0 if len(result.scores) == 1 else None)
        if k is None:
            report.skipped[task_id] = "no rollout was selected"
            continue
        rd = task_dir.rollout(k)
        info = rd.read_info()
        score = result.scores.get(k)
        if info is None or score is None:
            report.skipped[task_id] = f"rollout {k} has no score"
            continue
        name = (model or info.model.split("/", 1)[-1]).replace("/", "_")
        domain = domains.get(task_id) or task.snapshot or "other"
        folder = root / action_space / observation_type / name / domain / task_id
        _write_rollout(rd, folder, task.instruction, score)
        report.written[task_id] = folder
    return report
