"""Fixtures for the judge's tests: scripted models sharing a ledger, and a run on disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from bjudge_helpers import write_rollout

from core.llm import ChatModel, Ledger, Script
from core.llm.scripted import Step as ScriptStep
from core.trajectory import RunLayout, Task


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def scripted(ledger: Ledger) -> Callable[[str, Sequence[ScriptStep]], tuple[Script, ChatModel]]:
    def make(name: str, steps: Sequence[ScriptStep]) -> tuple[Script, ChatModel]:
        script = Script(name, list(steps))
        return script, ChatModel.from_name(f"scripted/{name}", ledger=ledger)

    return make


@pytest.fixture
def run_with_three(tmp_path: Path) -> RunLayout:
    """Task ``t1`` with three rollouts: 0 wanders, 1 saves the report (solves it), 2 gives up;
    and a fourth, errored rollout that must never be a candidate."""
    layout = RunLayout(tmp_path / "runs", "run1", durable=False)
    layout.task("t1").write_task(Task(id="t1", instruction="Save the report as report.txt"))
    write_rollout(layout, "t1", 0, ["Opened the View menu", "Closed the View menu"], "done", 0.0, seed=1)
    write_rollout(layout, "t1", 1, ["Typed the report text", "File report.txt saved"], "done", 1.0, seed=2)
    write_rollout(layout, "t1", 2, ["Opened the Help menu"], "failed", 0.0, seed=3)
    write_rollout(layout, "t1", 3, ["File report.txt saved"], "errored", None, seed=4)
    return layout
