"""Where the tests find OSWorld's real task files: `$AGENT_S3_OSWORLD_TASKS`, else the
`shared/reference/osworld_tasks` folder beside the checkout. Outside CI a missing copy skips
the tests that need it; in CI it fails them, so the check can never pass by not running."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["OSWORLD_TASKS", "requires_osworld_tasks"]

_ROOT = Path(__file__).resolve().parents[1]


def _find() -> Path:
    configured = os.environ.get("AGENT_S3_OSWORLD_TASKS")
    return Path(configured) if configured else _ROOT.parent / "shared" / "reference" / "osworld_tasks"


OSWORLD_TASKS = _find()

requires_osworld_tasks = pytest.mark.skipif(
    not OSWORLD_TASKS.is_dir() and not os.environ.get("CI"),
    reason=f"OSWorld task files not found at {OSWORLD_TASKS}; set AGENT_S3_OSWORLD_TASKS",
)
