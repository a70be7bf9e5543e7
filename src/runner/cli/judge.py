"""``agent-s3 judge RUN_DIR`` re-judges a finished run offline, and ``agent-s3 report
RUN_DIR`` rewrites its report.

Re-judging reads the rollouts from disk and reuses the run's fact cache, so a run whose
steps were narrated while it ran costs judge calls only. ``--import-osworld`` first copies
OSWorld result folders (one per rollout) into RUN_DIR, then judges them. Every call lands
in the run's ledger; selection.json, result.json and report.html are rewritten. The
evaluator's scores on disk are reported, never shown to a judge.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Annotated, Any

import typer

from bjudge import (
    JUDGES,
    REPRESENTATIONS,
    JudgeConfig,
    JudgedTask,
    MissingTaskError,
    NarrativeConfig,
    OSWorldImportError,
    import_osworld,
    judge_run,
    make_judge,
    make_representer,
)
from core import clock
from core.llm import ChatModel, Ledger, MissingAPIKeyError, UnknownProviderError
from core.trajectory import RunFolderError, RunLayout, TaskResult, rollout_errors

from ..demo_judge import DEMO_JUDGE_MODEL, register_demo_judge
from ..model_config import ModelConfig
from ..models import chat_model
from ..report import write_report
from ..running import run_clock
from ..wide import fact_cache
from .errors import fail
from .options import run_folder
from .wide import models_by_module

__all__ = ["judge_command", "rejudge", "report_command"]


def _recorded(layout: RunLayout) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(judge model settings, narrator model settings, narrative settings, judge settings)
    the run recorded; the narrator defaults to the judge and the judge to the policy."""
    config = layout.read_config() or {}
    found = config.get("wide")
    wide: dict[str, Any] = found if isinstance(found, dict) else {}
    judge = wide.get("judge_model") or config.get("policy") or {}
    narrator = wide.get("narrator_model") or judge
    return dict(judge), dict(narrator), dict(wide.get("narrative") or {}), dict(wide.get("judging") or {})


def _check_rollouts(layout: RunLayout) -> None:
    """Read every finished rollout once, so a damaged folder is named before any model is built."""
    for task_id in layout.task_ids():
        task_dir = layout.task(task_id)
        for k, info in task_dir.headers().items():
            if info is not None and info.finished:
                for _ in task_dir.rollout(k).iter_steps():
                    pass


def _chat(recorded: dict[str, Any], name: str | None, base_url: str | None, api_key: str | None,
          ledger: Ledger, role: str) -> ChatModel:
    """The model named on the command line, else the one the run recorded for `role`; the
    recorded endpoint is kept only for the recorded model."""
    chosen = name or recorded.get("model")
    if not chosen:
        raise ValueError(f"the run does not record a {role} model: pass --{role}-model provider/model")
    if chosen == DEMO_JUDGE_MODEL:
        register_demo_judge()
    same = name is None or name == recorded.get("model")
    url = base_url if base_url is not None else (recorded.get("base_url") if same else None)
    return chat_model(ModelConfig.named(str(chosen), url, api_key), ledger)


def _update_results(layout: RunLayout, judged: dict[str, JudgedTask]) -> None:
    for task_id, done in judged.items():
        task_dir = layout.task(task_id)
        old = task_dir.read_result()
        headers = task_dir.headers()
        scores = old.scores if old is not None else {k: info.score if info else None for k, info in headers.items()}
        errors = old.errors if old is not None else rollout_errors(headers)
        task_dir.write_result(TaskResult.from_scores(task_id, scores, selected=done.selection.chosen, errors=errors))


async def rejudge(layout: RunLayout, *, judge: str = "mcq", representation: str = "narrative",
                  model: str | None = None, base_url: str | None = None, api_key: str | None = None,
                  narrator_model: str | None = None, narrator_base_url: str | None = None,
                  seed: int | None = None, tasks: list[str] | None = None) -> dict[str, JudgedTask]:
    """Judge `layout`'s finished rollouts again with judge `model` (default: the one the
    run judged with, ``wide.judge_model``, else the policy's). Facts are written by
    `narrator_model` (default: the run's narrator), so keeping the narrator and changing
    the judge makes no narrative call. Writes narratives, selections, results, report."""
    recorded_judge, recorded_narrator, narrative, judging = _recorded(layout)
    ledger = Ledger(layout.ledger_path)
    tags = {"run": layout.run_id, "rejudge": "1"}
    judge_chat = _chat(recorded_judge, model, base_url, api_key, ledger, "judge").with_tags(**tags)
    if not recorded_narrator.get("model"):  # e.g. imported results: the judge narrates too
        recorded_narrator = {"model": judge_chat.name, "base_url": base_url}
    shares_judge = narrator_model is None and recorded_narrator.get("model") == judge_chat.name
    try:
        narrator_chat = _chat(recorded_narrator, narrator_model, narrator_base_url,
                              api_key if shares_judge else None, ledger, "narrator").with_tags(**tags)
    except BaseException:
        await judge_chat.aclose()
        raise
    try:
        narrative_cfg = NarrativeConfig.model_validate(narrative) if narrative else NarrativeConfig()
        judge_cfg = JudgeConfig.model_validate({**judging, **({"seed": seed} if seed is not None else {})})
        representer = make_representer(representation, narrator_chat, fact_cache(layout), narrative_cfg)
        judged = await judge_run(layout, representer, make_judge(judge, judge_chat, judge_cfg), tasks=tasks)
    finally:
        await judge_chat.aclose()
        await narrator_chat.aclose()
    await asyncio.to_thread(_update_results, layout, judged)
    await asyncio.to_thread(write_report, layout)
    return judged


def judge_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (or, with --import-osworld, where to create one).")],
    judge: Annotated[str, typer.Option("--judge", help=JUDGES.help("Which judge: "))] = "mcq",
    representation: Annotated[str, typer.Option("--representation", help=f"One of: {', '.join(REPRESENTATIONS)}.")] = "narrative",
    model: Annotated[str | None, typer.Option("--judge-model", "--model", "-m", help="Judge model as provider/model (default: the run's).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of the judge model's server.")] = None,
    narrator_model: Annotated[str | None, typer.Option("--narrator-model", help="Model that writes the facts (default: the run's narrator); keep it to re-use cached facts.")] = None,
    narrator_base_url: Annotated[str | None, typer.Option("--narrator-base-url", help="Endpoint of the narrator model's server.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the candidate shuffle.")] = None,
    import_dirs: Annotated[list[Path] | None, typer.Option("--import-osworld", help="OSWorld result folder; repeat once per rollout.")] = None,
    examples: Annotated[Path | None, typer.Option("--examples", help="OSWorld's evaluation_examples/examples, for instructions.")] = None,
) -> None:
    """Re-judge a finished run offline (facts come from the run's cache)."""
    try:
        JUDGES.validate(judge)
    except ValueError as e:
        raise fail(str(e)) from None
    if representation not in REPRESENTATIONS:
        raise fail(f"unknown representation {representation!r}: choose one of {', '.join(REPRESENTATIONS)}")
    layout = run_folder(run_dir, exists=not import_dirs)
    if import_dirs:
        if not model:
            raise fail("judging imported OSWorld results needs a judge model: pass --model provider/model")
        try:
            imported = import_osworld(import_dirs, layout, examples=examples)
        except OSWorldImportError as e:
            raise fail(str(e)) from None
        typer.echo(f"imported {sum(map(len, imported.rollouts.values()))} rollouts of "
                   f"{len(imported.rollouts)} tasks into {layout.path}")
    try:
        _check_rollouts(layout)
    except RunFolderError as e:
        raise fail(str(e)) from None
    before = sum(1 for _ in Ledger.iter_records(layout.ledger_path))  # streamed: a benchmark's ledger is large
    try:
        judged = clock.run(rejudge(layout, judge=judge, representation=representation, model=model,
                                   base_url=base_url, narrator_model=narrator_model,
                                   narrator_base_url=narrator_base_url, seed=seed), run_clock(layout))
    except MissingAPIKeyError as e:
        raise fail(f"the judge model needs an API key: set {e.variable}") from None
    except (UnknownProviderError, MissingTaskError, ValueError) as e:
        raise fail(str(e)) from None
    new = list(itertools.islice(Ledger.iter_records(layout.ledger_path), before, None))
    for task_id, done in sorted(judged.items()):
        chosen = "no selection" if done.selection.chosen is None else f"rollout {done.selection.chosen}"
        failed = f" (error: {done.selection.error[:300]})" if done.selection.error else ""
        typer.echo(f"{task_id}: {chosen} among {done.selection.candidates}{failed}")
    calls = {m: sum(r.module == m for r in new) for m in ("narrative", "judge")}
    typer.echo(f"model calls: {calls['narrative']} narrative, {calls['judge']} judge, "
               f"${sum(r.dollars for r in new):.4f}; report: {layout.report_path}")
    for module, names in sorted(models_by_module(new).items()):
        typer.echo(f"  {module} model: {', '.join(names)}")


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
) -> None:
    """Write the run's report.html again from its files."""
    layout = run_folder(run_dir)
    typer.echo(str(write_report(layout)))
