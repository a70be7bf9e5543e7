"""``agent-s3 tasks check DIR|LIST|TASK``: set every task up and score it untouched, with no
model and no key, on any environment (see `runner.task_check`). Before a benchmark, it says
which tasks would be errors rather than scores here, and which score 1 for doing nothing.

Writes a run folder (``check.json``: every task's check and the summary; ``run.log``; the
files each scorer fetched) and exits 0 when every task tried set up and every scorer ran,
`EXIT_TASK_ERRORS` (4) when some did not, 2 on bad input.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from core.atomic import write_json_atomic
from core.config import ConfigError
from core.protocols import EnvError
from core.trajectory import RunLayout, Task, check_name
from environments.kinds import describe_kinds
from environments.tasks import (
    TaskFileError,
    iter_task_files,
    load_task,
    load_task_list,
    task_gaps,
)
from environments.tasks.official import scorer_tag

from ..comparability import label_fields, label_line, record_environment
from ..config import RunConfig, load_run_config
from ..executors import check_executor, open_environments
from ..run_log import run_log
from ..task_check import CheckSummary, TaskCheck, check_tasks, summarize_checks
from ..task_errors import EXIT_TASK_ERRORS
from ..terminal import SafeConsole
from .errors import fail
from .options import Image, Network, OutDir, Token, Url, env_option, environment_overrides, option_overrides

__all__ = ["CHECK_FILE", "app"]

app = typer.Typer(help="OSWorld-format tasks: check them on an environment before a benchmark.",
                  no_args_is_help=True)

#: The checks' record in the run folder.
CHECK_FILE = "check.json"
_COLOURS = {"ok": "green", "flagged": "yellow", "no_scorer": "white", "skipped": "dim"}


def _is_task_list(path: Path) -> bool:
    """A task list maps domains to lists of ids; a task file has an instruction."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False  # load_task says what is wrong with it
    return isinstance(data, dict) and "instruction" not in data


def load_checked(source: Path, examples: Path | None) -> list[tuple[Task, str]]:
    """(task, domain) for a folder of ``<domain>/<id>.json`` files, a task list (its files under
    `examples`, default ``examples`` beside it), or one task file."""
    if source.is_dir():
        found = [(load_task(path, domain), domain) for domain, path in iter_task_files(source)]
        if not found:
            raise TaskFileError(f"{source}: no task files (<domain>/<id>.json) in this folder")
        return found
    if not source.is_file():
        raise TaskFileError(f"{source}: no such folder, task list or task file")
    if _is_task_list(source):
        return [(task, task.domain) for task in load_task_list(source, examples)]
    task = load_task(source)
    return [(task, task.domain or "other")]


def _row(check: TaskCheck) -> str:
    colour = _COLOURS.get(check.outcome, "red")
    setup = {True: "ok", False: "[red]FAILED[/red]", None: "—"}[check.setup_ok]
    scorer = {True: "ok", False: "[red]FAILED[/red]", None: "—"}[check.scorer_ok]
    score = "—" if check.score is None else f"{check.score:g}"
    why = f"  {escape(check.reason)}" if check.reason else ""
    kind = " (infeasible)" if check.infeasible else ""
    return (f"[{colour}]{check.outcome:<16}[/{colour}] {escape(check.domain)}/{escape(check.task_id)}{kind}: "
            f"setup {setup}, scorer {scorer}, untouched score {score}, {check.seconds:.1f} s{why}")


@app.command("check")
def check_command(
    source: Annotated[Path, typer.Argument(help="A folder of task files (<domain>/<id>.json, like OSWorld's "
                                                "evaluation_examples/examples), a task list (test_*.json) or one "
                                                "task file.")],
    examples: Annotated[Path | None, typer.Option("--examples", help="With a task list: the examples folder "
                                                  "(default: examples beside the list).")] = None,
    env: Annotated[str | None, env_option(help=f"Where the tasks are checked: {describe_kinds()}.")] = None,
    url: Url = None, token: Token = None, image: Image = None, network: Network = None,
    domain: Annotated[str | None, typer.Option("--domain", help="Only this domain.")] = None,
    task_ids: Annotated[list[str] | None, typer.Option("--task", help="Only these task ids (repeatable).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, help="At most this many tasks.")] = None,
    parallel: Annotated[int, typer.Option("--parallel", min=1, help="Tasks checked at once (local desktops are "
                                          "capped to what the machine has room for).")] = 1,
    out: OutDir = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the check's folder (default: "
                                               "check-<time>).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON on stdout (progress goes to "
                                          "stderr).")] = False,
    config: Annotated[list[str] | None, typer.Option("-c", "--config", help="A run YAML file or a key=value "
                                                     "override (environment settings); repeatable.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also show OSWorld's own log lines on the "
                                          "terminal (they always go to the folder's run.log).")] = False,
) -> None:
    """Set every task up and score it untouched, with no model and no key: which tasks would be
    errors here (setup or scorer failed), and which score 1 for doing nothing (flagged)."""
    console = SafeConsole(highlight=False, stderr=as_json)
    rid = run_id or f"check-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"
    given = option_overrides(**environment_overrides(kind=env, url=url, token=token, image=image, network=network),
                             out_dir=str(out) if out else None, run_id=rid)
    cfg, loaded = _settings([*(config or []), given], rid, source, examples)
    chosen = _choose(loaded, source, domain, task_ids, limit)
    skipped = [TaskCheck(t.id, d, "skipped", reason="cannot run anywhere: " + ", ".join(gaps))
               for t, d in chosen if (gaps := task_gaps(t))]
    runnable: list[tuple[Task, str]] = [(t, d) for t, d in chosen if not task_gaps(t)]
    layout = RunLayout(cfg.out_dir, rid)
    layout.create()
    console.print(f"[bold]tasks check[/bold] {len(runnable)} tasks of {escape(str(source))} on "
                  f"{escape(cfg.environment.where())}, {parallel} at once, no model; folder {layout.path}")
    for check in skipped:
        console.print(_row(check))
    started = time.perf_counter()
    checks = _run_checks(console, cfg, layout, runnable, parallel, verbose=verbose)
    everything = skipped + checks
    summary = summarize_checks(everything, time.perf_counter() - started)
    document = {"source": str(source), "environment": cfg.environment.kind, **label_fields(layout),
                "summary": {**summary.__dict__, "ok": summary.ok, "line": summary.line()},
                "tasks": [c.to_json() for c in everything]}
    write_json_atomic(layout.path / CHECK_FILE, document, durable=layout.durable)
    _print_summary(console, summary, everything, layout)
    if as_json:
        typer.echo(json.dumps(document, indent=1))
    if not summary.ok:
        raise typer.Exit(code=EXIT_TASK_ERRORS)


def _settings(layers: list[Any], rid: str, source: Path, examples: Path | None) -> tuple[RunConfig, list[tuple[Task, str]]]:
    """The check's configuration and the tasks read from `source`; a bad value is one line."""
    try:
        cfg: RunConfig = load_run_config(layers)
        check_name("run id", rid)
        cfg.environment.check()
        check_executor(cfg)
        loaded = load_checked(source.expanduser(), examples)
    except (ConfigError, EnvError, KeyError, ValueError) as e:
        raise fail(str(e).strip('"')) from None
    if cfg.out_dir.exists() and not cfg.out_dir.is_dir():  # a device or a file: refused, never replaced
        raise fail(f"--out {cfg.out_dir} exists and is not a folder; give a folder")
    return cfg, loaded


def _choose(loaded: list[tuple[Task, str]], source: Path, domain: str | None, task_ids: list[str] | None,
            limit: int | None) -> list[tuple[Task, str]]:
    """The tasks ``--domain``, ``--task`` and ``--limit`` keep; an unknown id or nothing left is refused."""
    chosen = [(t, d) for t, d in loaded if (domain is None or d == domain) and (not task_ids or t.id in task_ids)]
    if task_ids and (unknown := sorted(set(task_ids) - {t.id for t, _ in loaded})):
        raise fail(f"no such task in {source}: {', '.join(unknown)}")
    chosen = chosen[:limit] if limit else chosen
    if not chosen:
        raise fail(f"no task to check in {source}" + (f" for domain {domain!r}" if domain else ""))
    return chosen


def _run_checks(console: SafeConsole, cfg: RunConfig, layout: RunLayout, runnable: list[tuple[Task, str]],
                parallel: int, *, verbose: bool) -> list[TaskCheck]:
    """Check the runnable tasks, printing each as it lands; Ctrl-C stops the environments."""

    async def landed(check: TaskCheck) -> None:
        console.print(_row(check))

    try:
        with run_log(layout.path, verbose=verbose):
            return asyncio.run(_check(cfg, layout, runnable, parallel, landed))
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]; the environments were stopped")
        raise typer.Exit(code=130) from None
    except EnvError as e:
        raise fail(f"{e} (folder: {layout.path})") from None


def _print_summary(console: SafeConsole, summary: CheckSummary, everything: list[TaskCheck], layout: RunLayout) -> None:
    """The summary line, the tasks that scored for doing nothing, the label and the files."""
    colour = "green" if summary.ok and not summary.flagged else "yellow" if summary.ok else "red"
    console.print(f"[bold {colour}]{escape(summary.line())}[/bold {colour}]")
    for check in everything:
        if check.outcome == "flagged":
            console.print(f"  [yellow]flagged[/yellow] {escape(check.task_id)}: {escape(check.reason or '')}")
    console.print(f"[bold yellow]{escape(label_line(layout))}[/bold yellow]")
    console.print(f"[bold]files[/bold] {layout.path} ({CHECK_FILE}, run.log); scorer {scorer_tag()}")


async def _check(cfg: RunConfig, layout: RunLayout, tasks: list[tuple[Task, str]], parallel: int,
                 landed: Any) -> list[TaskCheck]:
    if not tasks:
        return []
    hide = (str(cfg.out_dir.resolve()),)
    async with open_environments(cfg, size=min(parallel, len(tasks)), hide=hide, run_id=layout.run_id) as pool:
        env = await pool.acquire()
        try:
            facts = await env.worker_facts()
            await asyncio.to_thread(record_environment, layout, facts)
        finally:
            pool.release(env)
        return await check_tasks(tasks, pool, layout.path, concurrency=parallel, on_check=landed)
