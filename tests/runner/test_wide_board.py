"""The live board of N rollouts: one row per rollout, updated by status changes and by
steps as they land (a retried rollout starts its step count over)."""

from __future__ import annotations

import io

from rich.console import Console

from core.trajectory import Step
from runner.board import RolloutBoard
from runner.rollout import StepEvent


def _render(board: RolloutBoard) -> list[str]:
    console = Console(file=io.StringIO(), width=160, color_system=None)
    console.print(board.table())
    return [line.rstrip() for line in console.file.getvalue().splitlines()]  # type: ignore[attr-defined]


def _event(k: int, index: int, action: dict[str, object], error: str | None = None) -> StepEvent:
    step = Step(index=index, action=action, error=error)
    return StepEvent(task_id="t", rollout=k, step=step, before=b"", after=None, rollout_dir=None)  # type: ignore[arg-type]


async def test_rows_follow_status_and_steps() -> None:
    board = RolloutBoard()
    for k, model in enumerate(["openai/a", "anthropic/b"]):
        board.watch("t", k, "waiting", model, 1)
    board.watch("t", 0, "running", "openai/a", 1)
    await board.hook(_event(0, 0, {"kind": "hotkey", "keys": ["ctrl", "s"]}))
    await board.hook(_event(0, 1, {"kind": "done"}))
    board.watch("t", 0, "done", "openai/a", 1)
    board.watch("t", 1, "running", "anthropic/b", 1)
    await board.hook(_event(1, 0, {"kind": "wait", "seconds": 1}, error="environment lost: X died"))
    board.watch("t", 1, "environment_lost", "anthropic/b", 1)
    board.watch("t", 1, "running", "anthropic/b", 2)
    rows = {r.split()[1]: r.split() for r in _render(board) if r.startswith("t ")}
    assert rows["0"][:5] == ["t", "0", "openai/a", "1", "2"] and "agent.done()" in rows["0"] and "done" in rows["0"]
    # The retry shows attempt 2, running, its step count and error reset.
    assert rows["1"][:5] == ["t", "1", "anthropic/b", "2", "0"] and "running" in rows["1"]
    assert "died" not in " ".join(rows["1"]) and "agent.wait" not in " ".join(rows["1"])


def test_task_errors_are_shown_and_counted_under_the_table() -> None:
    board = RolloutBoard()
    board.watch("t", 0, "setup_failed", "openai/a", 2)
    board.watch("t", 1, "scoring_failed", "openai/a", 1)
    board.watch("t", 2, "done", "openai/a", 1)
    lines = _render(board)
    rows = {r.split()[1]: r.split() for r in lines if r.startswith("t ")}
    assert "setup_failed" in rows["0"] and "scoring_failed" in rows["1"] and "done" in rows["2"]
    assert any(line.startswith("task errors: scoring_failed 1, setup_failed 1; errors: none") for line in lines)
