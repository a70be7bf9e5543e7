"""Import OSWorld result folders into our run layout, so their rollouts can be judged.

OSWorld writes one task attempt per folder,
``<result_dir>/<action_space>/<observation_type>/<model>/<domain>/<example_id>/``, with
``traj.jsonl`` (one line per executed action, naming the screenshot taken after it),
``step_*.png``, ``result.txt`` (the evaluator's score) and, from Agent S3's runner,
``step_0.png`` (the first screen) and ``instruction.txt``. Each result directory given
becomes one rollout index: ``results1`` → rollout 0, ``results2`` → rollout 1, and so on.

Pointer events are read from the recorded pyautogui code (`pointer_code`); the score goes
into the rollout header, which judges never see.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.trajectory import RolloutInfo, RolloutStatus, RunLayout, Step, Task

from .pointer_code import pointer_events

__all__ = ["ImportReport", "OSWorldImportError", "import_osworld"]

_CONTROL = {"DONE": "done", "FAIL": "fail", "WAIT": "wait"}


class OSWorldImportError(ValueError):
    """A results folder that cannot be imported as it is; the message says what to pass."""


@dataclass
class ImportReport:
    """What was imported: rollout indices per task, and folders skipped with why."""

    rollouts: dict[str, list[int]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def _task_dirs(result_dir: Path) -> list[Path]:
    return sorted(p.parent for p in result_dir.rglob("traj.jsonl"))


def _lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        raw = raw.strip()
        if not raw:
            continue
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def _task(folder: Path, domain: str, examples: Path | None) -> Task:
    instruction_file = folder / "instruction.txt"
    if examples is not None:
        example = examples / domain / f"{folder.name}.json"
        if example.is_file():
            try:
                return Task.from_osworld(json.loads(example.read_text(encoding="utf-8")), source_path=str(example))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "(top level)"
                raise OSWorldImportError(f"{example}: field {where!r}: {first['msg']}; fix the task file") from None
    if instruction_file.is_file():
        return Task(id=folder.name, instruction=instruction_file.read_text(encoding="utf-8").strip())
    raise OSWorldImportError(
        f"no instruction for task {domain}/{folder.name}: pass the OSWorld examples folder "
        "(evaluation_examples/examples) so the task JSON can be read"
    )


def _action(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(raw, dict):
        return raw, None
    if raw is None:
        return None, None
    text = str(raw).strip()
    if text.upper() in _CONTROL:
        return {"kind": _CONTROL[text.upper()]}, None
    return {"kind": "pyautogui"}, text


def _status(lines: list[dict[str, Any]]) -> tuple[RolloutStatus, str | None]:
    if any("Error" in line for line in lines):
        error = next(str(line["Error"]) for line in lines if "Error" in line)
        return "errored", error[:300]
    actions = [line for line in lines if "Error" not in line]
    last = str(actions[-1].get("action", "")).strip().upper() if actions else ""
    if last == "DONE":
        return "done", None
    if last == "FAIL":
        return "failed", None
    return "step_limit", "the trajectory ends without DONE or FAIL"


def _score(folder: Path) -> float | None:
    try:
        return float((folder / "result.txt").read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _import_one(folder: Path, k: int, layout: RunLayout, examples: Path | None, report: ImportReport) -> None:
    domain, model = folder.parent.name, folder.parent.parent.name
    task = _task(folder, domain, examples)
    task_dir = layout.task(task.id)
    if task_dir.read_task() is None:
        task_dir.write_task(task)
    lines = _lines(folder / "traj.jsonl")
    rd = task_dir.rollout(k)
    rd.start(RolloutInfo(run_id=layout.run_id, task_id=task.id, rollout=k, model=f"osworld/{model}",
                         started_at=(folder / "traj.jsonl").stat().st_mtime, environment="osworld"))
    initial = folder / "step_0.png"
    before_name: str | None = None
    index = 0
    for line in lines:
        if "Error" in line:
            continue
        shot = line.get("screenshot_file")
        if not isinstance(shot, str) or "/" in shot or not (folder / shot).is_file():
            report.skipped.append(f"{folder}: a line names no readable screenshot ({shot!r}); later lines dropped")
            break
        action, code = _action(line.get("action"))
        exec_code = line.get("exec_code")
        if isinstance(exec_code, str) and exec_code.strip():
            code = exec_code
        screenshots = {"after": (folder / shot).read_bytes()}
        if index == 0 and initial.is_file():
            screenshots["before"] = initial.read_bytes()
        extra = line.get("code_agent_output")
        step = Step(
            index=index,
            started_at=None,
            thought=str(line.get("response") or line.get("plan") or "")[:20000],
            reflection=str(line["reflection"]) if line.get("reflection") else None,
            action=action,
            code=code,
            before_screenshot=before_name if index > 0 else None,
            pointer=pointer_events(code),
            code_agent={"summary": str(extra)[:20000]} if extra else None,
        )
        before_name = rd.append_step(step, screenshots).after_screenshot
        index += 1
    status, reason = _status(lines)
    rd.finish(status, reason, score=_score(folder))
    report.rollouts.setdefault(task.id, []).append(k)


def import_osworld(result_dirs: Sequence[Path | str], layout: RunLayout, *,
                   examples: Path | str | None = None) -> ImportReport:
    """Copy each result directory's task attempts in as rollout k (k = its position).
    Blocking (it copies screenshots); call it through ``asyncio.to_thread`` from a loop."""
    report = ImportReport()
    examples_dir = Path(examples) if examples is not None else None
    for k, result_dir in enumerate(Path(r) for r in result_dirs):
        if not result_dir.is_dir():
            raise OSWorldImportError(f"{result_dir} is not a folder: pass OSWorld result directories")
        folders = _task_dirs(result_dir)
        if not folders:
            raise OSWorldImportError(f"{result_dir} holds no traj.jsonl: pass an OSWorld --result_dir")
        for folder in folders:
            _import_one(folder, k, layout, examples_dir, report)
    return report
