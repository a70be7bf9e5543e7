"""``agent-s3 critic``, ``filter`` and ``critic-bench``: outcome critics over finished runs.

``critic RUN_DIR`` grades every finished rollout, saves each deliberation beside it
(``critic-<name>.json``), prints one line per rollout and, where the evaluators scored the
rollouts, how often the critic agrees with them. ``filter RUN_DIR --out DIR`` copies the
rollouts the critic accepts into a run folder of their own. ``critic-bench`` lives in
`runner.cli.critic_bench`. Critic calls go to the run's ``ledger.jsonl`` (module ``critic``).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from core.llm import Ledger
from core.trajectory import RunLayout
from themis import (
    Graded,
    Published,
    TaskInfo,
    detect_format,
    export_accepted,
    grade_many,
    read_labels,
    run_items,
    trace_source,
)

from ..config import ModelConfig
from .critic_bench import critic_bench
from .critic_options import (
    BaseUrl,
    Concurrency,
    CriticName,
    ModelName,
    OptionList,
    OptionsFile,
    critic_options,
    make_critic_for,
    run_model,
)
from .errors import fail
from .options import run_folder

__all__ = ["agreement", "critic_rows", "register"]

_REASON_CHARS = 100


def _grade(layout: RunLayout, name: str, cfg: ModelConfig, *, concurrency: int, reuse: bool,
           options: dict[str, Any]) -> list[Graded]:
    try:
        items = run_items(layout)
    except FileNotFoundError as e:
        raise fail(str(e)) from None
    if not items:
        raise fail(f"{layout.path} holds no finished rollout to grade")
    critic, owned = make_critic_for(name, cfg, Ledger(layout.ledger_path), options, run=layout.run_id)

    async def go() -> list[Graded]:
        try:
            return await grade_many(critic, items, concurrency=concurrency, reuse=reuse)
        finally:
            for m in owned:
                await m.aclose()

    return asyncio.run(go())


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


def critic_rows(layout: RunLayout, graded: list[Graded]) -> list[tuple[str, str, str, str]]:
    """(rollout, evaluator score, reward, reason) per graded rollout."""
    headers = layout.headers()
    rows = []
    for g in graded:
        task_id, _, name = g.key.partition("/")
        k = int(name.rsplit("-", 1)[-1])
        info = headers.get(task_id, {}).get(k)
        score = "—" if info is None or info.score is None else f"{info.score:g}"
        if g.failure is not None:
            rows.append((g.key, score, "error", _short(g.failure)))
        else:
            assert g.verdict is not None
            rows.append((g.key, score, str(g.verdict.reward), _short(g.verdict.reason)))
    return rows


def agreement(layout: RunLayout, graded: list[Graded], *, threshold: float = 1.0) -> tuple[int, int]:
    """(agreeing, compared): rollouts with an evaluator score and a verdict, and how many
    of them the critic judged as the evaluator did (success = score at the threshold)."""
    headers = layout.headers()
    agree = total = 0
    for g in graded:
        task_id, _, name = g.key.partition("/")
        info = headers.get(task_id, {}).get(int(name.rsplit("-", 1)[-1]))
        if g.verdict is None or g.verdict.reward is None or info is None or info.score is None:
            continue
        total += 1
        agree += int(g.verdict.reward == (1 if info.score >= threshold - 1e-9 else 0))
    return agree, total


def _table(rows: Sequence[tuple[str, ...]], header: tuple[str, ...]) -> str:
    every = [header, *rows]
    widths = [max(len(r[i]) for r in every) for i in range(len(header) - 1)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)), r[-1]]) for r in every)


def critic(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (runs/<run_id>).")],
    name: CriticName = "themis",
    model: ModelName = None,
    base_url: BaseUrl = None,
    concurrency: Concurrency = 4,
    reuse: Annotated[bool, typer.Option("--reuse", help="Keep verdicts this critic already saved.")] = False,
    option: OptionList = None,
    options_file: OptionsFile = None,
    fmt: Annotated[str | None, typer.Option("--format", help="Grade published trajectories instead of a run: "
                                             "ogrbench or osreward (detected when the path is no run folder).")] = None,
) -> None:
    """Grade a run's finished rollouts, or published trajectories (an OGRBench folder, OSReward
    traces); save each deliberation beside its trajectory."""
    opts = critic_options(name, option, options_file)
    if fmt is not None or (not (run_dir / "config.yaml").is_file() and _published(run_dir)):
        _critic_published(run_dir, fmt, name, model, base_url, concurrency, reuse, opts)
        return
    layout = run_folder(run_dir)
    graded = _grade(layout, name, run_model(layout, model, base_url), concurrency=concurrency, reuse=reuse,
                    options=opts)
    typer.echo(_table(critic_rows(layout, graded), ("rollout", "score", "reward", "reason")))
    accepted = sum(g.accepted for g in graded)
    failed = sum(g.failure is not None for g in graded)
    typer.echo(f"{name}: accepted {accepted} of {len(graded)}"
               + (f", {failed} errors (the critic failed: no verdict; rerun to grade them again)" if failed else ""))
    agree, total = agreement(layout, graded)
    if total:
        typer.echo(f"agreement with the evaluators: {agree} of {total} ({100 * agree / total:.1f}%)")
    typer.echo(f"verdicts saved as critic-{name}.json in each rollout folder of {layout.path}")


def _published(path: Path) -> bool:
    """Published trajectories rather than a run folder (which has its config and task folders)."""
    if path.is_dir() and RunLayout(path.resolve().parent, path.resolve().name).config_path.is_file():
        return False
    try:
        return detect_format(path) in ("ogrbench", "osreward")
    except (OSError, ValueError):
        return False


def _critic_published(path: Path, fmt: str | None, name: str, model: str | None, base_url: str | None,
                      concurrency: int, reuse: bool, options: dict[str, Any]) -> None:
    """`critic` over published trajectories: verdicts beside each trace, agreement with its label."""
    if fmt not in (None, "ogrbench", "osreward"):
        raise fail(f"--format {fmt}: the critic grades trajectories, so use ogrbench or osreward")
    if model is None:
        raise fail("name the critic's model with --model provider/model")
    try:
        found = read_labels(path, fmt)
        bare = [e.id for e in found.entries if not e.instruction or not e.trace]
        if bare:
            raise ValueError(f"{bare[0]}: the trajectory names no instruction to grade against")
        items = [(e.id, TaskInfo(instruction=e.instruction or "", task_id=e.id, platform=e.platform),
                  Published(trace_source(e.trace or ""), Path(e.trace or ""))) for e in found.entries]
    except (OSError, ValueError) as e:
        raise fail(str(e)) from None
    if not items:
        raise fail(f"{path} holds no labelled trajectory")
    critic_obj, owned = make_critic_for(name, ModelConfig(model=model, base_url=base_url), Ledger(), options)

    async def go() -> list[Graded]:
        try:
            return await grade_many(critic_obj, items, concurrency=concurrency, reuse=reuse)
        finally:
            for m in owned:
                await m.aclose()

    graded = asyncio.run(go())
    labels = {e.id: e.label for e in found.entries}
    rows = [(g.key, str(labels[g.key]), "error" if g.failure else str(g.verdict.reward if g.verdict else ""),
             _short(g.failure or (g.verdict.reason if g.verdict else ""))) for g in graded]
    typer.echo(_table(rows, ("trajectory", "label", "reward", "reason")))
    judged = [g for g in graded if g.failure is None and g.verdict is not None]
    agree = sum(g.verdict.reward == labels[g.key] for g in judged if g.verdict is not None)
    failed = len(graded) - len(judged)
    typer.echo(f"{name}: accepted {sum(g.accepted for g in graded)} of {len(graded)} {found.format} trajectories"
               + (f", {failed} errors (no verdict; rerun to grade them again)" if failed else ""))
    if judged:
        typer.echo(f"agreement with the labels: {agree} of {len(judged)} ({100 * agree / len(judged):.1f}%)")
    typer.echo(f"verdicts saved beside each trajectory file as <name>.critic-{name}.json")


def filter_run(
    run_dir: Annotated[Path, typer.Argument(help="A run folder (runs/<run_id>).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder to write the accepted rollouts to.")],
    name: CriticName = "themis",
    model: ModelName = None,
    base_url: BaseUrl = None,
    concurrency: Concurrency = 4,
    regrade: Annotated[bool, typer.Option("--regrade", help="Grade again even where this critic's verdict is saved.")] = False,
    option: OptionList = None,
    options_file: OptionsFile = None,
) -> None:
    """Export the rollouts the critic accepts as a run folder of their own."""
    layout = run_folder(run_dir)
    opts = critic_options(name, option, options_file)
    if out.resolve() == layout.path or layout.path in out.resolve().parents:
        raise fail(f"--out {out} is inside the run folder; choose a folder outside {layout.path}")
    if out.exists() and not out.is_dir():  # before grading (model calls), not after; never replaced
        raise fail(f"--out {out} exists and is not a folder; give a folder")
    graded = _grade(layout, name, run_model(layout, model, base_url), concurrency=concurrency, reuse=not regrade,
                    options=opts)
    out_layout = RunLayout(out.resolve().parent, out.resolve().name)
    out_layout.path.mkdir(parents=True, exist_ok=True)
    written = asyncio.run(export_accepted(graded, out_layout))
    if layout.config_path.is_file() and not out_layout.config_path.exists():
        shutil.copy2(layout.config_path, out_layout.config_path)
    for g in graded:
        if g.failure is not None:
            typer.echo(f"{g.key}: error, not exported: {_short(g.failure)}")
    typer.echo(f"{name}: exported {len(written)} of {len(graded)} rollouts to {out_layout.path}")


def register(app: typer.Typer) -> None:
    """Add the three commands to the ``agent-s3`` app."""
    app.command("critic")(critic)
    app.command("filter")(filter_run)
    app.command("critic-bench")(critic_bench)
