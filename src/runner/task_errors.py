"""Tasks that errored: a rollout's setup or scorer failed, so the task has no score.

Such a task is an error of the task or the environment, never the agent's 0: metrics,
exports and sweeps leave it out and count it beside them. `count_task_errors` reads them from
a run folder (each task's ``result.json``, `TaskResult.errors`); `summarize_task_errors` prints
the final summary's lines (tasks run / scored / errored, then one line per errored task) and
returns the exit status they call for, `EXIT_TASK_ERRORS`; `TaskLines` prints a line per task
as it lands, with the counts so far.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rich.console import Console
from rich.markup import escape

from core.trajectory import RolloutError, RunLayout, Task, TaskResult

__all__ = ["EXIT_TASK_ERRORS", "TaskErrors", "TaskLines", "count_task_errors", "counts_line", "summarize_task_errors"]

#: Exit status of `run`, `bench` and `tasks check` when a task's setup or scorer failed.
EXIT_TASK_ERRORS = 4
#: Errored tasks named one per line on the terminal; the rest are in report.html.
_SHOWN = 20


@dataclass
class TaskErrors:
    """The run's tasks with a result: those scored, and those errored with their rollouts' errors."""

    scored: list[str] = field(default_factory=list)
    errored: dict[str, dict[int, RolloutError]] = field(default_factory=dict)

    @property
    def run(self) -> int:
        return len(self.scored) + len(self.errored)

    def by_outcome(self) -> Counter[str]:
        """Errored tasks per outcome (a task counts once under each outcome it has)."""
        return Counter(o for errors in self.errored.values() for o in {e.outcome for e in errors.values()})

    def lines(self) -> list[str]:
        """One line per errored rollout: task, rollout, outcome, cause."""
        return [f"{task_id} #{k} {e.outcome}: {e.reason}"
                for task_id, errors in sorted(self.errored.items()) for k, e in sorted(errors.items())]


def count_task_errors(layout: RunLayout) -> TaskErrors:
    """Scored and errored tasks of `layout` (blocking; reads results, never writes)."""
    out = TaskErrors()
    for task_id in layout.task_ids():
        result = layout.task(task_id).read_result()
        if result is None:
            continue
        if result.errored:
            out.errored[task_id] = dict(result.errors)
        else:
            out.scored.append(task_id)
    return out


def counts_line(errors: TaskErrors) -> str:
    """``tasks run 31: scored 14, errored 17 (setup_failed 16, scoring_failed 1)``."""
    kinds = errors.by_outcome()
    detail = f" ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))})" if kinds else ""
    return f"tasks run {errors.run}: scored {len(errors.scored)}, errored {len(errors.errored)}{detail}"


def summarize_task_errors(console: Console, layout: RunLayout) -> int:
    """Print how many tasks were scored and errored, and each errored rollout's one line;
    return `EXIT_TASK_ERRORS` when a task errored, else 0."""
    errors = count_task_errors(layout)
    if not errors.errored:
        console.print(f"[bold]{escape(counts_line(errors))}[/bold]")
        return 0
    console.print(f"[bold red]{escape(counts_line(errors))}[/bold red]: errors of the task or the environment, "
                  "not scores (left out of every rate)")
    lines = errors.lines()
    for line in lines[:_SHOWN]:
        console.print(f"  [red]{escape(line)}[/red]")
    if len(lines) > _SHOWN:
        console.print(f"  [red]... and {len(lines) - _SHOWN} more (report.html lists them all)[/red]")
    return EXIT_TASK_ERRORS


class TaskLines:
    """A benchmark's live lines: each task as it lands (its score, or its error in one line),
    with the counts so far: ``[12/31: scored 5, errored 7]``."""

    def __init__(self, console: Console, total: int) -> None:
        self.console, self.total = console, total
        self.counts = Counter({"scored": 0, "errored": 0})

    async def __call__(self, task: Task, result: TaskResult | BaseException) -> None:
        if isinstance(result, BaseException):
            self.counts["crashed"] += 1
            text = f"[red]{escape(task.id)}[/red] crashed: {escape(str(result)[:200])}"
        elif result.errored:
            self.counts["errored"] += 1
            first = next(iter(result.errors.values()))
            why = first.reason.removeprefix(f"task {task.id}: ")
            text = f"[red]{escape(task.id)}[/red] [bold red]{first.outcome}[/bold red]: {escape(why)}"
        else:
            self.counts["scored"] += 1
            score = "—" if result.selected_score is None else f"{result.selected_score:g}"
            text = (f"[bold]{escape(task.id)}[/bold] selected {result.selected} score {score}, "
                    f"pass@{result.n} {result.pass_at_n}")
        so_far = ", ".join(f"{k} {n}" for k, n in self.counts.items())
        self.console.print(f"{text} [dim]\\[{self.counts.total()}/{self.total}: {so_far}][/dim]")
