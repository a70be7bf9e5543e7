"""``agent-s3 run --rollouts N --mixture ... --judge ...``: the wide strategy on the
command line, with a live board of the rollouts and a summary when the judge has chosen.

`run_wide` starts as many environments as rollouts run at once (under the run's
executor: here, or on the hosts of a Ray cluster), runs the task,
writes report.html, and prints the pick and the cost per module.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import cast

from rich.console import Console
from rich.markup import escape

from core.config import dump_config
from core.llm import CallRecord, Ledger, MissingAPIKeyError, is_scripted
from core.llm.notices import watching_retries
from core.trajectory import RunLayout, Task

from ..board import RolloutBoard
from ..config import RunConfig
from ..demo_judge import DEMO_JUDGE_MODEL, DEMO_JUDGE_NOTE, register_demo_judge
from ..demo_policy import DEMO_MODEL
from ..executors import open_environments
from ..models import ModelSet, settled_config
from ..noop_policy import is_noop
from ..report import module_totals, write_report
from ..strategy import TaskRun, strategy_class
from ..wide import WideScaling
from ..wide_config import JudgeModelConfig

__all__ = ["models_by_module", "prepare_wide", "run_wide"]


def prepare_wide(cfg: RunConfig) -> RunConfig:
    """A scripted policy (the demo's, a do-nothing one) gets the scripted demo narrator and
    judge (labelled), unless a judge model is set (wide and branch runs)."""
    scripted = cfg.policy.model == DEMO_MODEL or is_noop(cfg.policy.model)
    if "judge" not in strategy_class(cfg).roles or not scripted or cfg.wide.judge_model is not None:
        return cfg
    register_demo_judge()
    wide = cfg.wide.model_copy(update={"judge_model": JudgeModelConfig(model=DEMO_JUDGE_MODEL)})
    label = f"{cfg.label}; {DEMO_JUDGE_NOTE}" if cfg.label else DEMO_JUDGE_NOTE
    return cfg.model_copy(update={"wide": wide, "label": label})


def models_by_module(records: Iterable[CallRecord]) -> dict[str, list[str]]:
    """Which models each module called (``narrative`` and ``judge`` differ when the
    narrator is not the judge), from the ledger."""
    found: dict[str, list[str]] = {}
    for record in records:
        names = found.setdefault(record.module, [])
        if record.model not in names:
            names.append(record.model)
    return found


async def run_wide(cfg: RunConfig, task: Task, layout: RunLayout, models: ModelSet, ledger: Ledger,
                   console: Console, *, resume: bool = False) -> WideScaling:
    """Run `task` under the wide (or branch) strategy on fresh environments; returns the strategy.

    With `resume`, rollouts an earlier attempt of the run finished are kept, not rerun."""
    hide = (str(cfg.out_dir.resolve()),)
    board = RolloutBoard(console, ledger=ledger)
    chosen = strategy_class(cfg)
    made = chosen.resuming(cfg, watch=board.watch) if resume else chosen(watch=board.watch)  # type: ignore[call-arg]
    strategy = cast(WideScaling, made)  # a board's strategy keeps what wide scaling keeps
    try:
        async with open_environments(cfg, size=chosen.width(cfg), hide=hide, run_id=layout.run_id) as pool:
            env = await pool.acquire()
            shown = await settled_config(cfg, env)
            pool.release(env)
            await asyncio.to_thread(layout.write_config, dump_config(shown))
            run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger,
                          hooks=[board.hook])
            with board.live(), watching_retries(board.retry):
                await strategy(run)
            console.print()
    finally:
        await strategy.aclose()
        await models.aclose()
        if layout.path.is_dir():
            await asyncio.to_thread(write_report, layout)
    return strategy


def summarize(console: Console, cfg: RunConfig, task: Task, strategy: WideScaling, layout: RunLayout) -> None:
    """The pick, the outcomes and scores, and the cost per module."""
    outcomes = strategy.outcomes.get(task.id, [])
    selection = strategy.selections.get(task.id)
    for o in outcomes:
        score = "—" if o.score is None else f"{o.score:g}"
        if o.error is not None:
            score = f"[red]none ({o.error.outcome})[/red]"
        console.print(f"[bold]rollout {o.index}[/bold] {o.result.status} after {o.result.steps} steps "
                      f"in {o.result.seconds:.1f} s, score {score}: {escape(o.result.reason)}")
    if selection is None:
        console.print(f"[bold]judge[/bold] none ({escape(cfg.wide.judge)}): no rollout was chosen")
    elif selection.chosen is None:
        why = f"[red]error[/red] {escape(selection.error[:300])}" if selection.error else escape(selection.reasoning[:300])
        console.print(f"[bold]judge[/bold] no selection among {selection.candidates}: {why}")
    else:
        chosen = next((o for o in outcomes if o.index == selection.chosen), None)
        score = "—" if chosen is None or chosen.score is None else f"{chosen.score:g}"
        console.print(f"[bold]judge[/bold] {escape(selection.strategy)} chose rollout {selection.chosen} "
                      f"among {selection.candidates} (its evaluator score: {score})")
    records = list(Ledger.read(layout.ledger_path))
    names = models_by_module(records)
    for module, t in module_totals(records).items():
        console.print(f"  {module:<12} {t.calls:>4} calls {t.seconds:>8.1f} s "
                      f"{t.input_tokens + t.output_tokens:>9} tokens ${t.dollars:.4f}  "
                      f"{escape(', '.join(names.get(module, [])))}")
    if cfg.label and is_scripted(None, cfg.label):
        console.print(f"[bold yellow]SCRIPTED[/bold yellow] {escape(cfg.label)}")
    console.print(f"[bold]files[/bold] {layout.path} (report: {layout.report_path})")


def missing_key_line(e: MissingAPIKeyError) -> str:
    return f"a model of the mixture or the judge needs an API key: set {e.variable}"
