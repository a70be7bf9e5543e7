"""``agent-s3 critic``, ``filter`` and ``critic-bench``: outcome critics over finished runs.

``critic RUN_DIR`` grades every finished rollout, saves each deliberation beside it
(``critic-<name>.json``), prints one line per rollout and, where the evaluators scored the
rollouts, how often the critic agrees with them. ``filter RUN_DIR --out DIR`` copies the
rollouts the critic accepts into a run folder of their own. ``critic-bench`` lives in
`runner.critic_bench_cli`. Critic calls go to the run's ``ledger.jsonl`` (module ``critic``).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from core.config import ConfigError, load_config
from core.llm import ChatModel, Ledger, MissingAPIKeyError, ScriptError, UnknownProviderError
from core.trajectory import RunLayout
from themis import (
    CRITICS,
    Critic,
    Graded,
    Published,
    TaskInfo,
    detect_format,
    export_accepted,
    grade_many,
    make_critic,
    read_labels,
    run_items,
    trace_source,
)

from .config import ModelConfig
from .retry import critic_model

__all__ = ["agreement", "critic_rows", "register"]

_REASON_CHARS = 100
CriticName = Annotated[str, typer.Option("--critic", help=f"Which critic: {', '.join(CRITICS)}.")]
ModelName = Annotated[str | None, typer.Option("--model", "-m", help="The critic's model as provider/model "
                                               "(default: the run's critic or policy model).")]
BaseUrl = Annotated[str | None, typer.Option("--base-url", help="Endpoint of the critic model's server.")]
Concurrency = Annotated[int, typer.Option("--concurrency", "-j", min=1, help="Rollouts graded at once.")]
OptionList = Annotated[list[str] | None, typer.Option("--option", help="A critic option as key=value "
                       "(dotted keys for nested ones: decoding.verifier.temperature=0.7, models.judge=openai/gpt-4o; "
                       "ablations: selector=false, verifier=false, reviewer=off|advisor, judge=false, "
                       "assignment_goals=false; voting: votes=3 vote=majority|all|any); repeatable.")]
OptionsFile = Annotated[Path | None, typer.Option("--options", help="A YAML file of critic options (applied "
                        "before each --option).")]


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


def _layout(run_dir: Path) -> RunLayout:
    if not run_dir.is_dir():
        raise _fail(f"{run_dir} is not a run folder: give the folder a run wrote (runs/<run_id>)")
    run_dir = run_dir.resolve()
    return RunLayout(run_dir.parent, run_dir.name)


def _run_model(layout: RunLayout, model: str | None, base_url: str | None) -> ModelConfig:
    """The critic's model: as given, else the one the run's configuration names."""
    if model is not None:
        return ModelConfig(model=model, base_url=base_url)
    cfg = layout.read_config() or {}
    for section in ((cfg.get("critic") or {}).get("model"), cfg.get("policy")):
        if isinstance(section, dict) and isinstance(section.get("model"), str):
            if section["model"].startswith("scripted/"):
                break  # a scripted policy cannot judge anything
            return ModelConfig(model=section["model"], base_url=base_url or section.get("base_url"))
    raise _fail("name the critic's model with --model provider/model (the run's configuration names none usable)")


def _options(name: str, option: list[str] | None, options_file: Path | None) -> dict[str, Any]:
    """The critic's options from ``--options FILE`` then each ``--option key=value``."""
    if name not in CRITICS:
        raise _fail(f"unknown critic {name!r}: choose one of {', '.join(CRITICS)}")
    sources: list[str | Path] = [*([options_file] if options_file is not None else []), *(option or [])]
    if not sources:
        return {}
    for text in option or []:
        if "=" not in text:
            raise _fail(f"--option {text!r}: write key=value, e.g. --option verifier=false")
    try:
        parsed = load_config(CRITICS[name][1], sources)
    except (ConfigError, OSError) as e:
        raise _fail(f"critic {name!r} options: {e}") from None
    return parsed.model_dump(exclude_defaults=True)


def _build(cfg: ModelConfig, ledger: Ledger) -> ChatModel:
    try:
        return critic_model(cfg, ledger)
    except MissingAPIKeyError as e:
        raise _fail(f"the critic's model {cfg.model} needs an API key: set {e.variable}") from None
    except (UnknownProviderError, ScriptError) as e:
        raise _fail(str(e)) from None


def _make(name: str, cfg: ModelConfig, ledger: Ledger, options: dict[str, Any] | None = None,
          **tags: str) -> tuple[Critic, list[ChatModel]]:
    """The critic and every model it owns (its own, then per-role ones, to close after).

    A role's model (``--option models.<role>=provider/model``) talks to ``--base-url`` when
    it has the critic model's provider, else to its provider's default endpoint."""
    options = dict(options or {})
    model = _build(cfg, ledger)
    owned = [model]
    roles: dict[str, ChatModel] = {}
    provider = cfg.model.split("/", 1)[0]
    for role, role_name in (options.get("models") or {}).items():
        if role_name == cfg.model:
            continue
        same = role_name.split("/", 1)[0] == provider
        built = _build(ModelConfig(model=role_name, base_url=cfg.base_url if same else None), ledger)
        owned.append(built)
        roles[role] = built.with_tags(**tags) if tags else built
    try:
        critic = make_critic(name, model.with_tags(**tags) if tags else model,
                             **({"role_models": roles} if roles else {}), **options)
    except ValueError as e:
        raise _fail(str(e)) from None
    return critic, owned


def _grade(layout: RunLayout, name: str, cfg: ModelConfig, *, concurrency: int, reuse: bool,
           options: dict[str, Any]) -> list[Graded]:
    try:
        items = run_items(layout)
    except FileNotFoundError as e:
        raise _fail(str(e)) from None
    if not items:
        raise _fail(f"{layout.path} holds no finished rollout to grade")
    critic, owned = _make(name, cfg, Ledger(layout.ledger_path), options, run=layout.run_id)

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
    opts = _options(name, option, options_file)
    if fmt is not None or (not (run_dir / "config.yaml").is_file() and _published(run_dir)):
        _critic_published(run_dir, fmt, name, model, base_url, concurrency, reuse, opts)
        return
    layout = _layout(run_dir)
    graded = _grade(layout, name, _run_model(layout, model, base_url), concurrency=concurrency, reuse=reuse,
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
        raise _fail(f"--format {fmt}: the critic grades trajectories, so use ogrbench or osreward")
    if model is None:
        raise _fail("name the critic's model with --model provider/model")
    try:
        found = read_labels(path, fmt)
        bare = [e.id for e in found.entries if not e.instruction or not e.trace]
        if bare:
            raise ValueError(f"{bare[0]}: the trajectory names no instruction to grade against")
        items = [(e.id, TaskInfo(instruction=e.instruction or "", task_id=e.id, platform=e.platform),
                  Published(trace_source(e.trace or ""), Path(e.trace or ""))) for e in found.entries]
    except (OSError, ValueError) as e:
        raise _fail(str(e)) from None
    if not items:
        raise _fail(f"{path} holds no labelled trajectory")
    critic_obj, owned = _make(name, ModelConfig(model=model, base_url=base_url), Ledger(), options)

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
    layout = _layout(run_dir)
    opts = _options(name, option, options_file)
    if out.resolve() == layout.path or layout.path in out.resolve().parents:
        raise _fail(f"--out {out} is inside the run folder; choose a folder outside {layout.path}")
    graded = _grade(layout, name, _run_model(layout, model, base_url), concurrency=concurrency, reuse=not regrade,
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
    from .critic_bench_cli import critic_bench

    app.command("critic")(critic)
    app.command("filter")(filter_run)
    app.command("critic-bench")(critic_bench)
