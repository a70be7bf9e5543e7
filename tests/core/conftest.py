"""Fixtures for core's records, run layout and configuration tests."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from core.trajectory import RolloutInfo, RunLayout, Step

RUN_ID = "run-1"


class Make:
    """Builders of valid records with recognisable contents."""

    run_id = RUN_ID

    @staticmethod
    def info(task_id: str, k: int, **changes: object) -> RolloutInfo:
        info = RolloutInfo(
            run_id=RUN_ID, task_id=task_id, rollout=k, model="scripted/policy", started_at=time.time()
        )
        return info.model_copy(update=changes)

    @staticmethod
    def step(index: int, **changes: object) -> Step:
        step = Step(index=index, thought=f"thinking about step {index}", action={"type": "click", "x": index})
        return step.model_copy(update=changes)

    @staticmethod
    def png(step: int, role: str) -> bytes:
        """Distinct bytes per screenshot (nothing here decodes them)."""
        return b"\x89PNG\r\n\x1a\n" + f"{step}-{role}".encode() * 50


@pytest.fixture
def make() -> type[Make]:
    return Make


@pytest.fixture
def layout(tmp_path: Path) -> RunLayout:
    return RunLayout(tmp_path / "runs", RUN_ID)


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every Step parsed from JSON, by whichever entry point."""
    seen: list[str] = []
    original_json = Step.model_validate_json.__func__  # type: ignore[attr-defined]
    original = Step.model_validate.__func__  # type: ignore[attr-defined]

    def from_json(cls: type[Step], data: Any, **kw: Any) -> Step:
        seen.append("json")
        return original_json(cls, data, **kw)

    def from_obj(cls: type[Step], data: Any, **kw: Any) -> Step:
        seen.append("obj")
        return original(cls, data, **kw)

    monkeypatch.setattr(Step, "model_validate_json", classmethod(from_json))
    monkeypatch.setattr(Step, "model_validate", classmethod(from_obj))
    return seen
