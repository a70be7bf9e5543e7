"""Fixtures of the critic tests (the builders live in critic_fixtures)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Root folder for the runs a test builds."""
    return tmp_path / "runs"
