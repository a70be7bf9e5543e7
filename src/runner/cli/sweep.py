"""``agent-s3 sweep RUN_DIR... --mixtures "gpt-5*5,claude*5;gpt-5*10" --n 1,2,4,8``:
blind selection, minimum + gain (oracle-filtered), the mean rollout and pass@N per mixture
and N from pools of finished rollouts (see `runner.sweep`), printed as a table and written
as ``sweep.json``, ``sweep.csv`` and ``sweep.png`` (against N, 95% bootstrap intervals) in
``--out`` (default ``<first run>/sweep``). The judge's calls land in that folder's
``ledger.jsonl``."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from bjudge import JUDGES, JudgeConfig, NarrativeConfig
from core import clock
from core.atomic import write_json_atomic
from core.llm import CallRecord, ChatModel, Ledger, MissingAPIKeyError, UnknownProviderError
from core.trajectory import RunLayout

from ..demo_judge import DEMO_JUDGE_MODEL, register_demo_judge
from ..model_config import ModelConfig
from ..models import chat_model
from ..running import run_clock
from ..sweep import MixtureSpec, SweepError, SweepPoint, errored_rollouts, parse_mixtures, sweep
from .errors import fail
from .options import run_folder

__all__ = ["plot_sweep", "sweep_command", "write_tables"]


def _recorded(layout: RunLayout) -> tuple[dict[str, Any], NarrativeConfig, dict[str, Any]]:
    config = layout.read_config() or {}
    wide = config.get("wide") if isinstance(config.get("wide"), dict) else {}
    assert isinstance(wide, dict)
    chosen = wide.get("judge_model") or config.get("policy") or {}
    narrative = NarrativeConfig.model_validate(wide["narrative"]) if wide.get("narrative") else NarrativeConfig()
    return dict(chosen), narrative, dict(wide.get("judging") or {})


def write_tables(points: list[SweepPoint], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [p.row() for p in points]
    write_json_atomic(out / "sweep.json", {"points": rows, "per_task": {f"{p.mixture}@{p.n}": p.per_task for p in points}})
    with (out / "sweep.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["mixture"])
        writer.writeheader()
        writer.writerows(rows)
    return out / "sweep.json", out / "sweep.csv"


def plot_sweep(points: list[SweepPoint], path: Path) -> Path:
    """Success of the pick against N per mixture (bars: 95% CI), pass@N dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    for label in dict.fromkeys(p.mixture for p in points):
        mine = sorted((p for p in points if p.mixture == label), key=lambda p: p.n)
        ns = [p.n for p in mine]
        if all(p.blind is not None and p.blind_ci is not None for p in mine):
            ys = [100 * (p.blind or 0.0) for p in mine]
            err = [[100 * ((p.blind or 0.0) - p.blind_ci[0]) for p in mine if p.blind_ci],
                   [100 * (p.blind_ci[1] - (p.blind or 0.0)) for p in mine if p.blind_ci]]
            line = ax.errorbar(ns, ys, yerr=err, marker="o", capsize=3, label=f"{label} (blind selection)")
            colour = line[0].get_color()
            ax.plot(ns, [100 * p.min_gain for p in mine], linestyle=":", color=colour, alpha=0.8,
                    label=f"{label} (minimum + gain)")
        else:
            err = [[100 * (p.min_gain - p.min_gain_ci[0]) for p in mine],
                   [100 * (p.min_gain_ci[1] - p.min_gain) for p in mine]]
            line = ax.errorbar(ns, [100 * p.min_gain for p in mine], yerr=err, marker="o", capsize=3,
                               label=f"{label} (minimum + gain)")
            colour = line[0].get_color()
        ax.plot(ns, [100 * p.pass_at_n for p in mine], linestyle="--", color=colour, alpha=0.6,
                label=f"{label} (pass@N)")
    ax.set_xlabel("N (rollouts per task)")
    ax.set_ylabel("success rate (%)")
    ax.set_title("Success against N")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _table(points: list[SweepPoint]) -> str:
    lines = [f"{'mixture':<32}{'N':>4}{'tasks':>7}{'blind %':>9}{'95% CI':>13}{'min+gain %':>12}{'95% CI':>13}"
             f"{'mean %':>8}{'pass@N %':>10}{'judge calls':>13}{'judge err':>11}"]
    for p in points:
        blind = "—" if p.blind is None else f"{100 * p.blind:.1f}"
        blind_ci = "—" if p.blind_ci is None else f"{100 * p.blind_ci[0]:.1f}-{100 * p.blind_ci[1]:.1f}"
        ci = f"{100 * p.min_gain_ci[0]:.1f}-{100 * p.min_gain_ci[1]:.1f}"
        lines.append(f"{p.mixture:<32}{p.n:>4}{p.tasks:>7}{blind:>9}{blind_ci:>13}{100 * p.min_gain:>12.1f}{ci:>13}"
                     f"{100 * p.mean_rollout:>8.1f}{100 * p.pass_at_n:>10.1f}{p.judge_calls:>13}{p.judge_errors:>11}")
    lines.append("blind: the judge's pick on every subset; min+gain: minimum + gain, oracle-filtered (subsets whose "
                 "rollouts agree count without a judge, as Agent-S's released scripts report); mean: the mean "
                 "rollout; pass@N: the best rollout (an oracle)")
    if any(p.judge_errors for p in points):
        lines.append("(judge err: draws whose judge failed for good, left out of the figures that needed them: "
                     "errors, not picks)")
    return "\n".join(lines)


def sweep_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Run folders holding pools of rollouts.")],
    mixtures: Annotated[str, typer.Option("--mixtures", help='Mixtures separated by ";", e.g. "gpt-5*5,claude*5;gpt-5*10".')],
    n: Annotated[str | None, typer.Option("--n", help="Values of N, e.g. 1,2,4,8 (default: each mixture's total).")] = None,
    samples: Annotated[int, typer.Option("--samples", min=1, help="Subsets drawn per task and point.")] = 5,
    judge: Annotated[str, typer.Option("--judge", help=JUDGES.help("Which judge: "))] = "mcq",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Judge model (default: the first run's).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="Endpoint of the judge model's server.")] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draws, the judge's shuffles and the bootstrap.")] = 0,
    out: Annotated[Path | None, typer.Option("--out", help="Where tables and the plot go (default <first run>/sweep).")] = None,
    oracle_only: Annotated[bool, typer.Option("--oracle-only", help="Judge only subsets whose rollouts disagree "
                                              "(minimum + gain only, no blind selection: fewer calls).")] = False,
) -> None:
    """Blind selection, minimum + gain, mean rollout and pass@N per mixture and N, by
    subsampling finished rollouts."""
    layouts = _layouts(run_dirs)
    specs, ns = _points(judge, mixtures, n)
    recorded, _, judging = _recorded(layouts[0])
    name = model or recorded.get("model")
    if not name:
        raise fail("the run records no judge model: pass --model provider/model")
    if name == DEMO_JUDGE_MODEL:
        register_demo_judge()
    url = base_url if base_url is not None else (recorded.get("base_url") if model in (None, recorded.get("model")) else None)
    folder = out or layouts[0].path / "sweep"
    folder.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(folder / "ledger.jsonl")
    before = len(ledger)
    chat = _judge_model(str(name), url, ledger)

    async def go() -> list[SweepPoint]:
        try:
            return await sweep(layouts, specs, ns, model=chat, judge=judge, samples=samples, seed=seed,
                               narrative_cfgs=[_recorded(lay)[1] for lay in layouts],
                               judge_cfg=JudgeConfig.model_validate(judging), oracle_only=oracle_only)
        finally:
            await chat.aclose()

    try:
        points = clock.run(go(), run_clock(layouts[0]))  # a simulated run's judge takes simulated time
    except SweepError as e:
        raise fail(str(e)) from None
    _print_and_write(points, layouts, folder, ledger.records[before:])


def _layouts(run_dirs: list[Path]) -> list[RunLayout]:
    """The run folders, each one that is not a folder refused in one line."""
    return [run_folder(d) for d in run_dirs]


def _points(judge: str, mixtures: str, n: str | None) -> tuple[list[MixtureSpec], list[int] | None]:
    """The mixtures and the values of N to sweep (None: each mixture's total), the judge checked."""
    try:
        JUDGES.validate(judge)
    except ValueError as e:
        raise fail(str(e)) from None
    try:
        specs = parse_mixtures(mixtures)
        ns = [int(x) for x in n.split(",") if x.strip()] if n else None
    except (SweepError, ValueError) as e:
        raise fail(f"{e}" if isinstance(e, SweepError) else f"--n takes numbers like 1,2,4,8 ({e})") from None
    if ns is not None and any(x < 1 for x in ns):
        raise fail("--n values must be at least 1")
    return specs, ns


def _judge_model(name: str, url: str | None, ledger: Ledger) -> ChatModel:
    """The judge's model, its calls tagged as the sweep's; a missing key is one line."""
    try:
        return chat_model(ModelConfig.named(name, url), ledger).with_tags(sweep="1")
    except MissingAPIKeyError as e:
        raise fail(f"the judge model needs an API key: set {e.variable}") from None
    except UnknownProviderError as e:
        raise fail(str(e)) from None


def _print_and_write(points: list[SweepPoint], layouts: list[RunLayout], folder: Path,
                     new: Sequence[CallRecord]) -> None:
    """The table, the rollouts left out, the files written and what the new calls cost."""
    typer.echo(_table(points))
    errored = errored_rollouts(layouts)
    if errored:
        typer.echo(f"left out: {errored} rollouts whose task setup or scorer failed (errors, not scores)")
    json_path, csv_path = write_tables(points, folder)
    png = plot_sweep(points, folder / "sweep.png")
    calls = {m: sum(r.module == m for r in new) for m in ("narrative", "judge")}
    typer.echo(f"model calls: {calls['narrative']} narrative, {calls['judge']} judge, ${sum(r.dollars for r in new):.4f}")
    typer.echo(f"written: {json_path}, {csv_path}, {png}")
    typer.echo(json.dumps({"points": len(points)}))
