"""Export a run in OSWorld's results layout, for submissions and OSWorld's own tools.

One folder per task, ``<root>/<action_space>/<observation_type>/<model>/<domain>/<id>/``,
holding the *selected* rollout (the only one when a task has one): ``traj.jsonl`` (one
line per action: ``step_num``, ``action``, ``response``, ``screenshot_file`` naming the
screen after it), ``step_0.png`` (the first screen), ``step_<n>.png``, ``recording.mp4``
when the rollout was recorded, ``result.txt`` and ``instruction.txt``. Control actions are
written as OSWorld writes them (``DONE``, ``FAIL``, ``WAIT``); others as the code that was
run, else the action's JSON.

OSWorld's result reader (``show_result.py``'s ``get_result``) averages the ``result.txt`` of
every task folder under every domain folder of the model folder, so the export writes what
the run's own summary counts, task for task: the same score (`metrics.selected_score`: a
task with no pick counts 0, and gets a ``result.txt`` of 0 with no trajectory), under the
same domain (`metrics.domain_of`), all in one model folder. A task without a result (not
finished) is left out, as the summary leaves it out; so is an errored task (its setup or
scorer failed: an error, not the agent's 0), which OSWorld's own runner would leave without a
``result.txt`` and run again. ``left_out.json`` beside the domains names every task left out
and why. ``args.json`` beside the domains (a
file, which the reader skips) says which run this is, the scorer and its version, and
whether the scores are leaderboard-comparable. Task folders of an earlier export of the same
run that this one no longer writes are removed; another run's folder is refused.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from core.atomic import write_json_atomic, write_text_atomic
from core.trajectory import RolloutDir, RunLayout, Step

from .comparability import label_fields
from .metrics import domain_of, selected_score
from .recording import RECORDING_FILE

__all__ = ["ARGS_FILE", "LEFT_OUT_FILE", "ExportError", "ExportReport", "export_osworld"]

_CONTROL = {"done": "DONE", "fail": "FAIL", "wait": "WAIT"}
#: OSWorld's run scripts keep their arguments here, in the model folder.
ARGS_FILE = "args.json"
#: The tasks the export left out (unfinished or errored) and why, beside the domains.
LEFT_OUT_FILE = "left_out.json"


class ExportError(ValueError):
    """The export cannot be written where asked (say, another run's results are there)."""


@dataclass
class ExportReport:
    """Folders written by task id, tasks scored without a trajectory, tasks left out with why."""

    written: dict[str, Path] = field(default_factory=dict)
    #: Tasks whose result.txt holds the run's 0 for "no rollout picked / none scored", with why.
    without_trajectory: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    #: Tasks left out because their setup or scorer failed (no score to export), with why.
    errored: dict[str, str] = field(default_factory=dict)
    #: The model folder: ``<root>/<action_space>/<observation_type>/<model>``.
    folder: Path | None = None


def _action_text(step: Step) -> str:
    kind = (step.action or {}).get("kind")
    if isinstance(kind, str) and kind in _CONTROL:
        return _CONTROL[kind]
    if step.code:
        return step.code
    return json.dumps(step.action or {}, sort_keys=True)


def _write_trajectory(rd: RolloutDir, folder: Path) -> None:
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
    video = rd.path / RECORDING_FILE
    if video.is_file():
        shutil.copyfile(video, folder / RECORDING_FILE)


def _model_name(layout: RunLayout, picks: dict[str, int | None], model: str | None) -> str:
    """One folder for the whole run (OSWorld's reader reads one model folder at a time): the
    given name, else the selected rollouts' policy model when they share one, else the run id."""
    if model is not None:
        return model.replace("/", "_")
    names = set()
    for task_id, k in picks.items():
        info = layout.task(task_id).rollout(k).read_info() if k is not None else None
        if info is not None:
            names.add(info.model.split("/", 1)[-1])
    return (names.pop() if len(names) == 1 else layout.run_id).replace("/", "_")


def _claim(folder: Path, run_id: str) -> None:
    """Refuse a model folder that holds another run's export."""
    args = folder / ARGS_FILE
    if not args.is_file():
        if folder.is_dir() and any(folder.iterdir()):
            raise ExportError(f"{folder} already holds results of another run: pass --model NAME or another root")
        return
    try:
        owner = json.loads(args.read_text()).get("agent_s3_run")
    except (ValueError, AttributeError):
        owner = None
    if owner != run_id:
        raise ExportError(f"{folder} holds the export of run {owner!r}: pass --model NAME or another root")


def export_osworld(layout: RunLayout, root: Path, *, domains: dict[str, str] | None = None,
                   model: str | None = None, action_space: str = "pyautogui",
                   observation_type: str = "screenshot") -> ExportReport:
    """Write each task's selected rollout of `layout` under `root` (blocking). `model`
    names the folder (default: see `_model_name`); `ExportError` if the folder is another run's."""
    report = ExportReport()
    domains = domains or {}
    finished = {}
    for task_id in layout.task_ids():
        task_dir = layout.task(task_id)
        result, task = task_dir.read_result(), task_dir.read_task()
        if result is None or task is None:
            report.skipped[task_id] = "no result.json or task.json (unfinished)"
            continue
        if result.errored:
            report.errored[task_id] = "errored, no score: " + "; ".join(
                f"rollout {k} {e.outcome}: {e.reason}" for k, e in sorted(result.errors.items()))
            continue
        finished[task_id] = (result, task)
    picks = {t: (r.selected if r.selected is not None else (next(iter(r.scores)) if len(r.scores) == 1 else None))
             for t, (r, _) in finished.items()}
    base = root / action_space / observation_type / _model_name(layout, picks, model)
    _claim(base, layout.run_id)
    base.mkdir(parents=True, exist_ok=True)
    report.folder = base
    for task_id, (result, task) in finished.items():
        folder = base / domain_of(domains, task_id) / task_id
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        k = picks[task_id]
        info = layout.task(task_id).rollout(k).read_info() if k is not None else None
        if k is None or info is None or result.scores.get(k) is None:
            report.without_trajectory[task_id] = ("no rollout was selected" if k is None
                                                  else f"rollout {k} was not scored")
        else:
            _write_trajectory(layout.task(task_id).rollout(k), folder)
        write_text_atomic(folder / "result.txt", f"{selected_score(result)}\n")  # as lib_run_single writes it
        write_text_atomic(folder / "instruction.txt", task.instruction)
        report.written[task_id] = folder
    for domain_dir in (p for p in base.iterdir() if p.is_dir()):  # an earlier export's leftovers
        for stale in (p for p in domain_dir.iterdir() if p.is_dir() and report.written.get(p.name) != p):
            shutil.rmtree(stale)
        if not any(domain_dir.iterdir()):
            domain_dir.rmdir()
    left_out = {**report.skipped, **report.errored}
    write_json_atomic(base / LEFT_OUT_FILE, {t: {"domain": domain_of(domains, t), "why": why}
                                             for t, why in sorted(left_out.items())})
    write_json_atomic(base / ARGS_FILE, {
        "agent_s3_run": layout.run_id, "action_space": action_space, "observation_type": observation_type,
        "model": base.name, "left_out": len(left_out), **label_fields(layout),
    })
    return report
