"""A model call being retried shows in the live progress: which module, why, how long so
far; once more when it ends. The single run's printer throttles its lines; the wide board
lists the calls being retried under its table."""

from __future__ import annotations

import io

from rich.console import Console

from core.llm.notices import RetryNotice
from runner.board import RolloutBoard
from runner.progress import RetryPrinter


def _notice(kind: str, elapsed: float, attempt: int, *, call: str = "c1", succeeded: bool = False) -> RetryNotice:
    return RetryNotice(kind, call, "anthropic/claude-opus-5-5", "policy", "server_error",  # type: ignore[arg-type]
                       attempt, elapsed, 4.0, 500, "HTTP 500: bad gateway", succeeded,
                       tags={"task": "t1", "rollout": "2"})


def test_the_printer_says_a_call_is_retried_without_flooding() -> None:
    out = io.StringIO()
    printer = RetryPrinter(Console(file=out, width=300, highlight=False), every=20)
    for attempt, elapsed in enumerate((1, 5, 12, 25, 30, 46), start=1):
        printer(_notice("retry", elapsed, attempt))
    printer(_notice("done", 50, 7, succeeded=True))
    printer(_notice("done", 1, 1, call="never-shown"))
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # at 1 s, 25 s, 46 s, and the end
    assert lines[0] == ("policy call (anthropic/claude-opus-5-5, t1 #2) retrying: server_error (HTTP 500), "
                        "attempt 1 failed, 1 s so far, next in 4 s")
    assert "25 s so far" in lines[1] and "46 s so far" in lines[2]
    assert lines[3].endswith("answered after 7 attempts in 50 s (last failure: server_error (HTTP 500))")


def test_the_board_lists_the_calls_being_retried_until_they_end() -> None:
    board = RolloutBoard(Console(file=io.StringIO(), width=300))
    board.retry(_notice("retry", 12, 2))
    shown = io.StringIO()
    Console(file=shown, width=300).print(board.view())
    assert "policy call (anthropic/claude-opus-5-5, t1 #2) retrying: server_error (HTTP 500)" in shown.getvalue()
    board.retry(_notice("done", 20, 3, succeeded=True))
    assert board.retrying == {}
