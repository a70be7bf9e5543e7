"""Whether a run's scores can stand beside OSWorld's leaderboard, as its environment says.

The environment knows (`WorkerFacts.leaderboard_note`): a local desktop runs Debian's app
builds and Chromium for Chrome, an OSWorld VM runs OSWorld's image. The runner records what
the environments of a run said in ``environment.json`` in the run folder and every result
it writes (``summary.json``, the terminal summary, ``report.html``, the OSWorld export's
``args.json``) carries it, with the scorer and its version. A run that ever ran on a
non-comparable environment stays labelled so when resumed elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

from core.atomic import write_json_atomic
from core.protocols import WorkerFacts
from core.trajectory import RunLayout
from environments.tasks.official import scorer_tag

__all__ = ["ENVIRONMENT_FILE", "label_fields", "label_line", "read_label", "record_environment"]

ENVIRONMENT_FILE = "environment.json"


def read_label(layout: RunLayout) -> dict[str, Any] | None:
    """What ``environment.json`` says, or None for a run that never recorded it."""
    try:
        data = json.loads((layout.path / ENVIRONMENT_FILE).read_bytes())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_environment(layout: RunLayout, facts: WorkerFacts) -> dict[str, Any]:
    """Write (or keep) the run's label from what its environment says of itself (blocking)."""
    before = read_label(layout) or {}
    now = facts.leaderboard_comparable if facts.leaderboard_comparable is not None else facts.leaderboard_note is None
    was = bool(before.get("leaderboard_comparable", True))
    # A run that ever ran somewhere not comparable keeps that label; otherwise this environment's note.
    note = facts.leaderboard_note if was else before.get("comparability_note")
    data = {"leaderboard_comparable": now and was, "comparability_note": note}
    layout.path.mkdir(parents=True, exist_ok=True)
    write_json_atomic(layout.path / ENVIRONMENT_FILE, data, durable=layout.durable)
    return data


def label_fields(layout: RunLayout) -> dict[str, Any]:
    """The fields every result of the run carries: the scorer and, when recorded, the label."""
    fields: dict[str, Any] = {"scorer": scorer_tag()}
    label = read_label(layout)
    if label is not None:
        fields["leaderboard_comparable"] = bool(label.get("leaderboard_comparable"))
        fields["comparability_note"] = label.get("comparability_note")
    return fields


def label_line(layout: RunLayout) -> str:
    """One line for people: the scorer, and the environment's note (why scores are not
    comparable, or how a comparable environment differs on purpose)."""
    fields = label_fields(layout)
    note = fields.get("comparability_note")
    return f"scored by {fields['scorer']}" + (f"; {note}" if note else "")
