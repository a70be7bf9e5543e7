"""Module failures, counted from what the run recorded, so a guide, narrator, judge or critic
whose calls failed for good is never silent.

Each module's records say when it failed (after the model layer's retries): a guide's step
record (``step.guide["error"]``), a rollout's narrative (``error``), a judge's selection
(``error``), a critic's verdict (``critic-<name>.json``, ``error``); the policy's failed
calls are the ledger's ``policy`` records with an ``error``. `count_run` reads them from a
run folder; `ErrorTally` counts them live, from the steps as they land and the ledger.
The run exits non-zero (`EXIT_MODULE_ERRORS`) when a module failed on more than
``max_module_error_share`` of its records. Failed calls are also told by kind (the ledger's
`error_kind`): a refusal, a spend limit and a reply cut at the token limit each show as such.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from core.llm import CallRecord, Ledger
from core.trajectory import RunLayout, Step

from .rollout import StepEvent

__all__ = [
    "EXIT_MODULE_ERRORS",
    "MODULES",
    "ErrorTally",
    "ModuleCount",
    "count_run",
    "failing_line",
    "failing_modules",
    "summarize_errors",
]

#: The modules counted, in the order they are shown; "guide" is the step guide (GUI-PRA or
#: the standard PRM), "judge" the selection of a wide run.
MODULES = ("policy", "guide", "narrative", "judge", "critic")
#: Exit status of `run` and `bench` when a module failed on more than its allowed share.
EXIT_MODULE_ERRORS = 3
_SHOWN = 160
#: Ledger module names that the tally shows under another name.
_LEDGER_MODULES = {"prm": "guide"}


@dataclass
class ModuleCount:
    """Records of one module, and how many of them say it failed."""

    total: int = 0
    errors: int = 0
    #: The first failure's message (shortened), to say what went wrong.
    first: str | None = None

    def add(self, error: object) -> None:
        self.total += 1
        if error:
            self.errors += 1
            if self.first is None:
                text = " ".join(str(error).split())
                self.first = text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."

    @property
    def share(self) -> float:
        return self.errors / self.total if self.total else 0.0


@dataclass
class ErrorTally:
    """Failures per module; `line()` is what the live progress and the summary print."""

    counts: dict[str, ModuleCount] = field(default_factory=lambda: {m: ModuleCount() for m in MODULES})
    #: Calls of the other modules that failed for good, from the ledger: live, before their
    #: records (narratives, selection, verdicts) are written; at the end, a cross-check.
    failed_calls: dict[str, int] = field(default_factory=dict)
    #: Failed calls per module by their kind (the ledger's `error_kind`: refusal,
    #: content_filter, spend_limit, quota, length, rate_limit, server_error, ...).
    kinds: dict[str, Counter[str]] = field(default_factory=dict)
    _ledger_seen: int = 0

    def add(self, module: str, error: object) -> None:
        self.counts.setdefault(module, ModuleCount()).add(error)

    def add_step(self, step: Step) -> None:
        if step.guide is not None:
            self.add("guide", step.guide.get("error"))

    async def hook(self, event: StepEvent) -> None:
        """A step hook: counts the guide's record of each step as it lands."""
        self.add_step(event.step)

    def follow(self, ledger: Ledger) -> None:
        """Count the calls the ledger gained since the last look."""
        records = ledger.records[self._ledger_seen:]
        self._ledger_seen += len(records)
        self.add_calls(records)

    def add_calls(self, records: Iterable[CallRecord]) -> None:
        """The policy's calls, and the failed calls of the other modules."""
        for record in records:
            module = _LEDGER_MODULES.get(record.module, record.module)
            if record.error and record.error_kind:  # ledgers before error kinds were recorded have none
                self.kinds.setdefault(module, Counter())[record.error_kind] += 1
            if record.module == "policy":
                self.add("policy", record.error)
            elif record.error:
                self.failed_calls[module] = self.failed_calls.get(module, 0) + 1

    def kind_text(self, module: str) -> str:
        """``refusal 2, spend_limit 1``: the kinds of `module`'s failed calls, most first."""
        found = self.kinds.get(module)
        return ", ".join(f"{kind} {n}" for kind, n in found.most_common()) if found else ""

    @property
    def failed(self) -> dict[str, ModuleCount]:
        return {m: c for m, c in self.counts.items() if c.errors}

    def line(self) -> str:
        """``errors: guide 2/14, judge 1/1`` over the modules that failed (then ``failed
        calls: narrative 3`` while running); ``errors: none``."""
        failed = self.failed
        parts = [f"{m} {c.errors}/{c.total}" + (f" ({self.kind_text(m)})" if self.kinds.get(m) else "")
                 for m, c in failed.items()]
        text = "errors: " + (", ".join(parts) if parts else "none")
        if self.failed_calls:
            text += "; failed calls: " + ", ".join(
                f"{m} {n}" + (f" ({self.kind_text(m)})" if m not in failed and self.kinds.get(m) else "")
                for m, n in sorted(self.failed_calls.items()))
        return text

    def details(self) -> list[str]:
        """One line per failing module: its count, the kinds of its failed calls, its first
        failure."""
        return [f"{m}: {c.errors} of {c.total} failed" + (f" ({self.kind_text(m)})" if self.kinds.get(m) else "")
                + f"; first: {c.first}" for m, c in self.failed.items()]


def _raw(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def count_run(layout: RunLayout) -> ErrorTally:
    """Failures per module recorded in `layout`'s run folder (blocking; reads, never writes)."""
    tally = ErrorTally()
    for task_id in layout.task_ids():
        task_dir = layout.task(task_id)
        for k in task_dir.rollout_indices():
            rollout = task_dir.rollout(k)
            for step in rollout.iter_steps():
                tally.add_step(step)
            for verdict in sorted(rollout.path.glob("critic-*.json")):
                tally.add("critic", _raw(verdict).get("error"))
        if task_dir.narratives_path.is_dir():
            for narrative in sorted(task_dir.narratives_path.glob("*.json")):
                tally.add("narrative", _raw(narrative).get("error"))
        selection = _raw(task_dir.path / "selection.json")
        if selection and not str(selection.get("strategy", "")).startswith("retry-"):
            tally.add("judge", selection.get("error"))
    if layout.ledger_path.exists():
        tally.add_calls(Ledger.read(layout.ledger_path))
    return tally


def failing_modules(tally: ErrorTally, max_share: float) -> dict[str, ModuleCount]:
    """The modules that failed on more than `max_share` of their records."""
    return {m: c for m, c in tally.counts.items() if c.errors and c.share > max_share}


def failing_line(failing: dict[str, ModuleCount], max_share: float) -> str:
    """The one line said before exiting non-zero."""
    parts = ", ".join(f"{m} {c.errors}/{c.total} ({c.share:.0%})" for m, c in failing.items())
    return (f"module failures over the allowed share of {max_share:.0%}: {parts}; see the errors above "
            f"and report.html (raise max_module_error_share to accept them)")


def summarize_errors(console: Console, layout: RunLayout, max_share: float) -> int:
    """Print the run's failures per module (the final summary's lines) and return the exit
    status they call for: 0, or `EXIT_MODULE_ERRORS` when a module failed on more than
    `max_share` of its records."""
    tally = count_run(layout)
    if not tally.failed and not tally.failed_calls:
        console.print("[bold]module errors[/bold] none: every guide, narrator, judge, critic and policy record "
                      "succeeded")
        return 0
    console.print(f"[bold red]{escape(tally.line())}[/bold red]")
    for line in tally.details():
        console.print(f"  [red]{escape(line)}[/red]")
    failing = failing_modules(tally, max_share)
    if not failing:
        return 0
    console.print(f"[bold red]error[/bold red] {escape(failing_line(failing, max_share))}")
    return EXIT_MODULE_ERRORS
