"""Live progress of N rollouts on the terminal: one row per rollout (model, attempt, step,
last action, status), redrawn in place by rich while the rollouts run.

It is fed by the wide strategy's watch callback (status changes) and a step hook (steps
as they land), so what it shows is what was stored. A rollout whose task setup or scorer
failed shows ``setup_failed`` / ``scoring_failed`` in red. Under the table, a line counts
those, and the guide records and model calls that failed for good so far (`ErrorTally`);
below it, each model call being retried now (which module, why, how long so far).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.console import Console, Group
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from core import clock
from core.llm import Ledger
from core.llm.notices import RetryNotice
from core.trajectory import TASK_ERRORS

from .module_errors import ErrorTally
from .progress import describe_action
from .rollout import StepEvent
from .run_log import official_output_to_log
from .terminal import SafeConsole

__all__ = ["RolloutBoard"]

_COLOURS = {"done": "green", "running": "cyan", "failed": "yellow", "errored": "red", "environment_lost": "red",
            "setup_failed": "red", "scoring_failed": "red"}


@dataclass
class _Row:
    model: str = ""
    status: str = "waiting"
    attempt: int = 1
    step: int = 0
    action: str = ""
    error: str | None = None
    started: float = field(default_factory=clock.monotonic)
    ended: float | None = None


class RolloutBoard:
    """``with board.live(): ...`` shows the table; `watch` and `hook` update it."""

    def __init__(self, console: Console | None = None, *, ledger: Ledger | None = None) -> None:
        self.console = console or SafeConsole(highlight=False)
        self.rows: dict[tuple[str, int], _Row] = {}
        self.tally = ErrorTally()
        self.ledger = ledger
        #: Calls being retried now, by call: shown under the table until they end.
        self.retrying: dict[str, RetryNotice] = {}
        self._live: Live | None = None

    def retry(self, notice: RetryNotice) -> None:
        """A retry listener (`core.llm.notices.watching_retries`)."""
        if notice.kind == "done":
            self.retrying.pop(notice.call, None)
        else:
            self.retrying[notice.call] = notice
        self._refresh()

    def watch(self, task_id: str, k: int, status: str, model: str, attempt: int) -> None:
        row = self.rows.setdefault((task_id, k), _Row(model=model))
        if status == "running" and row.status != "running":
            row.started, row.ended, row.step, row.error, row.action = clock.monotonic(), None, 0, None, ""
        row.status, row.attempt, row.model = status, attempt, model
        if status not in ("waiting", "starting", "running"):
            row.ended = clock.monotonic()
        self._refresh()

    async def hook(self, event: StepEvent) -> None:
        row = self.rows.setdefault((event.task_id, event.rollout), _Row())
        row.step = max(row.step, event.step.index + 1)
        row.action = describe_action(event.step.action)
        row.error = event.step.error
        self.tally.add_step(event.step)
        self._refresh()

    def table(self) -> Table:
        if self.ledger is not None:
            self.tally.follow(self.ledger)
        failing = bool(self.tally.failed or self.tally.failed_calls)
        line = self.tally.line()
        errored = Counter(row.status for row in self.rows.values() if row.status in TASK_ERRORS)
        if errored:
            failing = True
            line = "task errors: " + ", ".join(f"{s} {n}" for s, n in sorted(errored.items())) + "; " + line
        caption = f"[red]{escape(line)}[/red]" if failing else f"[dim]{escape(line)}[/dim]"
        table = Table(expand=False, box=None, pad_edge=False, caption=caption, caption_justify="left")
        for name in ("task", "#", "model", "try", "step", "last action", "status", "s"):
            table.add_column(name, no_wrap=name != "last action", overflow="ellipsis")
        now = clock.monotonic()
        for (task_id, k), row in sorted(self.rows.items()):
            colour = _COLOURS.get(row.status, "white")
            status = f"[{colour}]{escape(row.status)}[/{colour}]"
            if row.error:
                status += f" [red]({escape(row.error[:40])})[/red]"
            seconds = (row.ended or now) - row.started if row.status != "waiting" else 0.0
            table.add_row(escape(task_id), str(k), escape(row.model), str(row.attempt), str(row.step),
                          escape(row.action[:60]), status, f"{seconds:.0f}")
        return table

    def view(self) -> Group:
        """The table, then a line per model call being retried now."""
        lines = [Text(notice.line(), style="yellow") for notice in list(self.retrying.values())[:6]]
        return Group(self.table(), *lines)

    @contextmanager
    def live(self) -> Iterator[Live]:
        """Show the table while inside; what OSWorld's code prints meanwhile stays in the log."""
        self._live = Live(self.view(), console=self.console, refresh_per_second=4, transient=False)
        with self._live, official_output_to_log():
            yield self._live

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.view())
