"""Live progress on the terminal: one line per step as it lands, and the outcome; and a
line whenever a model call is being retried (which module, why, how long so far).

It is a step hook like the judge's narrator, so what it shows is what was stored. Given an
`ErrorTally` (and the run's ledger), each line also says how many guide records and model
calls have failed for good so far.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from agent_s3 import action_adapter, action_call
from core.llm import Ledger
from core.llm.notices import RetryNotice

from .module_errors import ErrorTally
from .rollout import StepEvent

__all__ = ["RetryPrinter", "StepPrinter", "describe_action"]

_WIDTH = 90


def describe_action(action: dict[str, object] | None) -> str:
    """The action as the ``agent.<name>(...)`` call the policy wrote."""
    if not action:
        return "(no action)"
    try:
        text = action_call(action_adapter.validate_python(action))
    except ValueError:
        text = json.dumps(action, ensure_ascii=False)
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


class StepPrinter:
    """Prints ``task/rollout step n: action -> status`` for every stored step."""

    def __init__(self, console: Console | None = None, *, tally: ErrorTally | None = None,
                 ledger: Ledger | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.tally = tally
        self.ledger = ledger

    async def __call__(self, event: StepEvent) -> None:
        step = event.step
        status = f"[red]{escape(step.error)}[/red]" if step.error else "[green]ok[/green]"
        if step.code_agent:
            session = step.code_agent
            status += f" (code agent: {session.get('reason')} after {session.get('steps_used')} steps)"
        seconds = step.timings.propose + step.timings.execute + step.timings.settle
        errors = ""
        if self.tally is not None:
            self.tally.add_step(step)
            if self.ledger is not None:
                self.tally.follow(self.ledger)
            if self.tally.failed or self.tally.failed_calls:
                errors = f" [red]\\[{escape(self.tally.line())}][/red]"
        self.console.print(
            f"[bold]{escape(event.task_id)}[/bold] #{event.rollout} step {step.index + 1}: "
            f"{escape(describe_action(step.action))} → {status} [dim]({seconds:.1f} s)[/dim]{errors}"
        )


class RetryPrinter:
    """Prints a line when a model call is retried, again every `every` seconds while it keeps
    being retried, and once when it ends: so a call that spends minutes in retries (a server
    answering 500 to every image, a rate limit) is never silent. Register it with
    `core.llm.notices.watching_retries`."""

    def __init__(self, console: Console | None = None, *, every: float = 20.0) -> None:
        self.console = console or Console(highlight=False)
        self.every = every
        self._shown: dict[str, float] = {}

    def __call__(self, notice: RetryNotice) -> None:
        if notice.kind == "done":
            if self._shown.pop(notice.call, None) is not None:
                colour = "green" if notice.succeeded else "red"
                self.console.print(f"[{colour}]{escape(notice.line())}[/{colour}]")
            return
        last = self._shown.get(notice.call)
        if last is None or notice.elapsed - last >= self.every:
            self._shown[notice.call] = notice.elapsed
            self.console.print(f"[yellow]{escape(notice.line())}[/yellow]")
