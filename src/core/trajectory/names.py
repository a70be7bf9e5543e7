"""File and folder names of the run layout, in one place."""

from __future__ import annotations

import re

__all__ = [
    "CONFIG_FILE",
    "INFO_FILE",
    "LEDGER_FILE",
    "NARRATIVES_DIR",
    "REPORT_FILE",
    "RESULT_FILE",
    "SCREENSHOT_ROLES",
    "SELECTION_FILE",
    "TASK_FILE",
    "TRAJ_FILE",
    "check_name",
    "narrative_name",
    "rollout_dir_name",
    "rollout_index",
    "screenshot_name",
    "step_image_name",
]

CONFIG_FILE = "config.json"
LEDGER_FILE = "ledger.jsonl"
REPORT_FILE = "report.html"
TASK_FILE = "task.json"
NARRATIVES_DIR = "narratives"
SELECTION_FILE = "selection.json"
RESULT_FILE = "result.json"
TRAJ_FILE = "traj.jsonl"
INFO_FILE = "rollout.json"
SCREENSHOT_ROLES = ("before", "after")

_LABEL = re.compile(r"^[a-z0-9][a-z0-9_]{0,39}$")
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_ROLLOUT = re.compile(r"^rollout-(\d+)$")


def check_name(kind: str, value: str) -> str:
    """Refuse an id that would not be one plain folder name (``..``, ``/``, hidden, empty)."""
    if not _SAFE.match(value) or ".." in value:
        raise ValueError(
            f"{kind} {value!r} cannot name a folder: use letters, digits, '.', '_' and '-' "
            "(not starting with '.' or '-', no '..', at most 200 characters)"
        )
    return value


def rollout_dir_name(k: int) -> str:
    if k < 0:
        raise ValueError(f"rollout index must be >= 0, not {k}")
    return f"rollout-{k}"


def rollout_index(dir_name: str) -> int | None:
    """k for a folder named ``rollout-<k>``, else None."""
    match = _ROLLOUT.match(dir_name)
    return int(match.group(1)) if match else None


def screenshot_name(step: int, role: str) -> str:
    """``step-0003-before.png``: sorts by step, then role."""
    if role not in SCREENSHOT_ROLES:
        raise ValueError(f"screenshot role {role!r} is not one of {', '.join(SCREENSHOT_ROLES)}")
    return f"step-{step:04d}-{role}.png"


def narrative_name(k: int) -> str:
    return f"rollout-{k}.json"


def step_image_name(step: int, label: str) -> str:
    """``step-0003-extra-ui_parser.png``: a further picture of a step (e.g. a guide's
    overlay), named by a short lowercase label; sorts beside the step's screenshots."""
    if not _LABEL.match(label):
        raise ValueError(f"step image label {label!r} must be 1-40 of a-z, 0-9 and '_', not starting with '_'")
    return f"step-{step:04d}-extra-{label}.png"
