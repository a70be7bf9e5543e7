"""``agent-s3 bench osworld|local``: a whole task list under one strategy, resumable;
``agent-s3 bench metrics RUN_DIR`` and ``agent-s3 bench export RUN_DIR ROOT``.

Resuming is implied: running a command again with the same ``--out`` and ``--run-id``
continues that run (finished tasks and rollouts are kept, the rest are run), and a run
made with other settings is refused in one line. See `runner.resume`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from bjudge import JUDGES
from core.config import ConfigError
from core.llm import Ledger, MissingAPIKeyError, UnknownProviderError, is_scripted
from core.llm.notices import watching_retries
from core.protocols import EnvError
from core.trajectory import RunLayout, check_name
from environments.kinds import get_kind
from environments.tasks import SUITE_DIR, TaskError

from ..bench import LOCAL_LIST, BenchRun, BenchTasks, load_bench_tasks, run_bench
from ..comparability import label_line
from ..config import RunConfig, load_run_config
from ..demo_policy import DEMO_MODEL, DEMO_NOTE, register_demo_suite
from ..executors import check_executor
from ..guide_ablation import (
    ablation_rows,
    apply_variant,
    format_ablation,
    parse_guides,
    shared_seed,
    write_ablation,
)
from ..guided import check_guide
from ..metrics import compute_metrics, format_metrics, write_metrics
from ..models import ModelSet, build_models
from ..module_errors import summarize_errors
from ..noop_policy import NOOP_NOTE, is_noop, register_noop
from ..osworld_export import LEFT_OUT_FILE, ExportError, ExportReport, export_osworld
from ..presets import with_preset
from ..pricing import check_prices, unpriced_line
from ..progress import RetryPrinter
from ..report import write_report
from ..resume import ResumeMismatch, identity_of, read_manifest
from ..run_log import run_log
from ..running import run_async, with_simulation_label
from ..strategies import STRATEGIES
from ..strategy import check_strategy
from ..task_errors import EXIT_TASK_ERRORS, TaskLines, summarize_task_errors
from ..terminal import SafeConsole
from .errors import fail
from .models import check_models
from .options import (
    Configs,
    EnvKind,
    Image,
    Network,
    OutDir,
    PolicyBaseUrl,
    Preset,
    Settle,
    Url,
    environment_overrides,
    option_overrides,
    run_folder,
)
from .wide import missing_key_line, prepare_wide

__all__ = ["app"]

app = typer.Typer(help="Benchmarks: OSWorld task lists or the local suite, resumable.", no_args_is_help=True)


Opt = typer.Option


def _bench(suite: str, list_file: Path, examples: Path | None, opts: dict[str, Any], *, domain: str | None,
           limit: int | None, parallel: int, export: Path | None, config: list[str] | None,
           preset: str | None = None, guides: str | None = None, variant: str | None = None,
           verbose: bool = False) -> None:
    if guides is not None:
        _bench_guides(suite, list_file, examples, opts, domain=domain, limit=limit, parallel=parallel,
                      export=export, config=with_preset(preset, config), guides=guides, verbose=verbose)
        return
    console = SafeConsole(highlight=False)
    rollouts, mixture = opts.get("wide__rollouts"), opts.get("wide__mixture")
    if opts.get("strategy") is None and (rollouts or mixture):
        opts["strategy"] = "wide"
    cfg, bench, unpriced = _prepare([*with_preset(preset, config), option_overrides(opts)], variant, list_file,
                                    examples, domain=domain, limit=limit)
    for option, folder in (("--export", export), ("--out", cfg.out_dir)):
        if folder is not None and folder.exists() and not folder.is_dir():  # before the run, not after
            raise fail(f"{option} {folder} exists and is not a folder; give a folder")
    if not bench.tasks:
        raise fail(f"no runnable task in {list_file}" + (f" for domain {domain!r}" if domain else "")
                   + ": check --domain, or the skipped tasks' gaps with `python -m environments.tasks`")
    layout = RunLayout(cfg.out_dir, str(cfg.run_id), durable=cfg.durable)
    identity = identity_of(cfg.model_dump(mode="json"), tasks=str(list_file.resolve()),
                           examples=str(examples.resolve()) if examples else None, domain=domain, limit=limit)
    ledger = Ledger(layout.ledger_path)
    models = _build_models(cfg, ledger)
    _header(console, suite, cfg, bench, layout, unpriced)
    landed = TaskLines(console, len(bench.tasks))
    try:
        with run_log(layout.path, verbose=verbose), watching_retries(RetryPrinter(console)):
            done = run_async(cfg, run_bench(cfg, bench, layout, models, ledger, suite=suite, identity=identity,
                                            concurrency=parallel, on_task=landed))
    except ResumeMismatch as e:
        raise fail(str(e)) from None
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]; run the same command again to resume {layout.path}")
        raise typer.Exit(code=130) from None
    except MissingAPIKeyError as e:
        raise fail(missing_key_line(e)) from None
    except EnvError as e:
        raise fail(f"{e} (run again to resume: {layout.path})") from None
    _report(console, cfg, bench, layout, done, export)


def _prepare(layers: list[Any], variant: str | None, list_file: Path, examples: Path | None, *,
             domain: str | None, limit: int | None) -> tuple[RunConfig, BenchTasks, list[str]]:
    """The benchmark's configuration and tasks, every setting checked before anything starts
    (a bad value is one line); also the models without a price (said once)."""
    try:
        cfg: RunConfig = load_run_config(layers)
        if variant is not None:
            cfg = apply_variant(cfg, variant)
        if not cfg.run_id:
            raise ValueError("a benchmark needs --run-id NAME (run it again with the same name to resume)")
        check_name("run id", cfg.run_id)
        check_strategy(cfg)
        check_guide(cfg)
        check_models(cfg)
        check_executor(cfg)
        cfg.environment.check()
        unpriced = check_prices(cfg)
        bench: BenchTasks = load_bench_tasks(list_file, examples, domain=domain, limit=limit,
                                             check_gaps=not get_kind(cfg.environment.kind).own_scoring)
        if cfg.policy.model == DEMO_MODEL:
            _demo_only(bench)
            cfg = cfg.model_copy(update={"label": cfg.label or DEMO_NOTE})
        elif is_noop(cfg.policy.model):
            register_noop(cfg.policy.model)
            cfg = cfg.model_copy(update={"label": cfg.label or NOOP_NOTE})
        cfg = with_simulation_label(prepare_wide(cfg))
    except (ConfigError, EnvError, TaskError, KeyError, ValueError) as e:
        raise fail(str(e).strip('"')) from None
    return cfg, bench, unpriced


def _build_models(cfg: RunConfig, ledger: Ledger) -> ModelSet:
    """The benchmark's models; a missing key says which variable to set, or how to check the
    tasks without one."""
    try:
        return build_models(cfg, ledger)
    except MissingAPIKeyError as e:
        raise fail(f"{cfg.policy.model} needs an API key: set {e.variable} (or check the tasks without a key: "
                   "--model scripted/noop, or `agent-s3 tasks check`)") from None
    except UnknownProviderError as e:
        raise fail(str(e)) from None


def _header(console: Console, suite: str, cfg: RunConfig, bench: BenchTasks, layout: RunLayout,
            unpriced: list[str]) -> None:
    """What runs and where: tasks, the ones skipped and why, unpriced models, labels, resuming."""
    console.print(f"[bold]bench[/bold] {suite}: {len(bench.tasks)} tasks, {len(bench.skipped)} skipped "
                  f"(unsupported setup or evaluator), strategy {cfg.strategy}; run folder {layout.path}")
    for task_id, gaps in sorted(bench.skipped.items()):
        console.print(f"  [dim]skipped {escape(task_id)}: {escape(', '.join(gaps))}[/dim]")
    if unpriced:
        console.print(f"[bold yellow]warning[/bold yellow] {escape(unpriced_line(unpriced))}")
    if cfg.label and "SIMULATED" in cfg.label:
        console.print(f"[bold yellow]SIMULATED[/bold yellow] {escape(cfg.label)}")
    if read_manifest(layout) is not None:  # resuming by run id is a benchmark's documented rule
        console.print(f"[bold]resuming[/bold] run {escape(layout.run_id)}: its finished rollouts are kept, the "
                      "rest run (pass another --run-id for a new run)")


def _report(console: Console, cfg: RunConfig, bench: BenchTasks, layout: RunLayout, done: BenchRun,
            export: Path | None) -> None:
    """Metrics, report.html, the export, the labels and the errors; exits 1 when tasks failed to
    run, else with the task or module error status."""
    if done.resumed:
        console.print(f"[bold]resumed[/bold]: {len(done.kept)} tasks kept from before, {len(done.ran)} run now")
    assert done.metrics is not None
    console.print(format_metrics(done.metrics), markup=False)
    console.print(f"[bold yellow]{escape(label_line(layout))}[/bold yellow]")
    write_report(layout)
    if export is not None:
        try:
            exported = export_osworld(layout, export, domains=bench.domains)
        except ExportError as e:
            raise fail(str(e)) from None
        _print_left_out(console, exported)
        console.print(f"[bold]exported[/bold] {len(exported.written)} tasks to {exported.folder}")
    if is_scripted(cfg.policy.model, cfg.label):
        console.print(f"[bold yellow]SCRIPTED[/bold yellow] replies came from a script, not a model"
                      f"{': ' + escape(cfg.label) if cfg.label else ''}")
    if cfg.label and "SIMULATED" in cfg.label:
        console.print("[bold yellow]SIMULATED[/bold yellow] no desktop ran and no model was called: every figure "
                      "above is simulated (seconds are simulated seconds)")
    task_status = summarize_task_errors(console, layout)
    module_status = summarize_errors(console, layout, cfg.max_module_error_share)
    console.print(f"[bold]files[/bold] {layout.path} (summary.json, report.html, run.log)")
    if done.errors:
        raise typer.Exit(code=1)
    if task_status or module_status:
        raise typer.Exit(code=task_status or module_status)


def _print_left_out(console: Console, exported: ExportReport) -> None:
    """The tasks the export left out: unfinished ones by name, errored ones counted (each is
    named in the errors below); all are in the export's left_out.json."""
    for task_id, why in sorted(exported.skipped.items()):
        console.print(f"  [yellow]left out of the export[/yellow] {escape(task_id)}: {escape(why)}")
    if exported.errored:
        where = exported.folder / LEFT_OUT_FILE if exported.folder else LEFT_OUT_FILE
        console.print(f"  [yellow]left out of the export[/yellow] {len(exported.errored)} errored tasks (no score, "
                      f"no result.txt: their setup or scorer failed); listed in {escape(str(where))}")


def _bench_guides(suite: str, list_file: Path, examples: Path | None, opts: dict[str, Any], *, guides: str,
                  **kw: Any) -> None:
    """Every guide variant on the same tasks and seeds, then one table (see `runner.guide_ablation`)."""
    console = SafeConsole(highlight=False)
    try:
        variants = parse_guides(guides)
    except ValueError as e:
        raise fail(str(e)) from None
    run_id = opts.get("run_id")
    if not run_id:
        raise fail("a comparison of guides needs --run-id NAME (run it again with the same name to resume)")
    if opts.get("wide__seed") is None:
        opts = {**opts, "wide__seed": shared_seed(str(run_id))}
    failed: list[str] = []
    for variant in variants:
        console.print(f"[bold]guide[/bold] {variant}: run {run_id}-{variant}, seed {opts['wide__seed']}")
        try:
            _bench(suite, list_file, examples, {**opts, "run_id": f"{run_id}-{variant}"}, variant=variant, **kw)
        except typer.Exit as e:
            if e.exit_code not in (1, EXIT_TASK_ERRORS):
                raise
            failed.append(variant)
    cfg = load_run_config([*(kw.get("config") or []), option_overrides(opts)])
    layouts = {v: RunLayout(cfg.out_dir, f"{run_id}-{v}") for v in variants}
    scripted = is_scripted(cfg.policy.model, cfg.label)
    rows = ablation_rows(layouts)
    md, _ = write_ablation(Path(cfg.out_dir), str(run_id), rows, scripted=scripted, seed=opts["wide__seed"])
    console.print(format_ablation(rows, scripted=scripted), markup=False)
    console.print(f"[bold]table[/bold] {md}")
    if failed:
        console.print(f"[red]tasks failed to run under[/red] {', '.join(failed)}")
        raise typer.Exit(code=1)


def _demo_only(bench: BenchTasks) -> None:
    """Keep the tasks the scripted demo policy has a plan for; set the others aside, named."""
    planned = register_demo_suite({t.id: t.instruction for t in bench.tasks})
    for task in bench.tasks:
        if task.id not in planned:
            bench.skipped[task.id] = ["no plan of the scripted demo policy (scripted/demo)"]
            bench.domains.pop(task.id, None)
    bench.tasks = [t for t in bench.tasks if t.id in planned]


def _common(**kw: Any) -> dict[str, Any]:
    return {
        "policy__model": kw["model"], "policy__base_url": kw["base_url"],
        **environment_overrides(kind=kw["env"], url=kw.get("url"), image=kw.get("image"), network=kw.get("network")),
        "out_dir": str(kw["out"]) if kw["out"] else None, "run_id": kw["run_id"],
        "rollout__max_steps": kw["max_steps"], "rollout__settle_seconds": kw["settle"], "strategy": kw["strategy"],
        "wide__rollouts": kw["rollouts"], "wide__mixture": kw["mixture"], "wide__judge": kw["judge"],
        "wide__judge_model__model": kw["judge_model"], "wide__judge_model__base_url": kw["judge_base_url"],
        "wide__seed": kw["seed"],
    }


_MODEL = Annotated[str | None, Opt("--model", "-m", help="Policy model as provider/model.")]
_ROLL = Annotated[int | None, Opt("--rollouts", min=1, help="N rollouts per task (wide scaling).")]
_MIX = Annotated[str | None, Opt("--mixture", help="provider/model*count,... (wide scaling).")]
_JUDGE = Annotated[str | None, Opt("--judge", help=JUDGES.help("Wide scaling: ", extra=("none",)))]
_JM = Annotated[str | None, Opt("--judge-model", help="Narrator and judge model (default: the policy's).")]
_JB = Annotated[str | None, Opt("--judge-base-url", help="Endpoint of the judge model's server.")]
_STRAT = Annotated[str | None, Opt("--strategy", help=STRATEGIES.help("How each task is run: "))]
_DOMAIN = Annotated[str | None, Opt("--domain", help="Only this domain of the task list.")]
_LIMIT = Annotated[int | None, Opt("--limit", min=1, help="At most this many runnable tasks.")]
_RID = Annotated[str | None, Opt("--run-id", help="Run folder name; the same name again resumes the run.")]
_STEPS = Annotated[int | None, Opt("--max-steps", help="Step budget of a rollout.")]
_SEED = Annotated[int | None, Opt("--seed", help="Base seed of the rollouts (default: drawn, kept on resume).")]
_PAR = Annotated[int, Opt("--parallel", min=1, help="Tasks run at once.")]
_EXPORT = Annotated[Path | None, Opt("--export", help="Also write the selected rollouts in OSWorld's results layout here.")]
_VERBOSE = Annotated[bool, Opt("--verbose", "-v", help="Also show OSWorld's own log lines (desktop-env's loggers and "
                                 "prints) on the terminal; they always go to the run folder's run.log.")]
_GUIDES = Annotated[str | None, Opt("--guides", help="Compare step guides on the same seeds, e.g. "
                                    "none,prm,gprm,gprm-no-memory,gprm-no-tools,gprm-no-point; one run each and a table.")]


@app.command("osworld")
def bench_osworld(
    tasks: Annotated[Path, Opt("--tasks", help="OSWorld task list, e.g. evaluation_examples/test_nogdrive.json.")],
    examples: Annotated[Path | None, Opt("--examples", help="The examples folder (default: examples beside the list).")] = None,
    model: _MODEL = None, base_url: PolicyBaseUrl = None, env: EnvKind = None, url: Url = None, image: Image = None,
    rollouts: _ROLL = None,
    mixture: _MIX = None, judge: _JUDGE = None, judge_model: _JM = None, judge_base_url: _JB = None,
    strategy: _STRAT = None, domain: _DOMAIN = None, limit: _LIMIT = None, out: OutDir = None, run_id: _RID = None,
    max_steps: _STEPS = None, settle: Settle = None, seed: _SEED = None, parallel: _PAR = 1,
    export: _EXPORT = None, config: Configs = None, preset: Preset = None, guides: _GUIDES = None, network: Network = None,
    verbose: _VERBOSE = False,
) -> None:
    """Run an OSWorld task list (unsupported tasks are skipped and named)."""
    opts = _common(model=model, base_url=base_url, env=env, url=url, image=image, out=out, run_id=run_id,
                   max_steps=max_steps,
                   settle=settle, strategy=strategy, rollouts=rollouts, mixture=mixture, judge=judge,
                   judge_model=judge_model, judge_base_url=judge_base_url, seed=seed, network=network)
    _bench("osworld", tasks, examples, opts, domain=domain, limit=limit, parallel=parallel, export=export,
           config=config, preset=preset, guides=guides, verbose=verbose)


@app.command("local")
def bench_local(
    model: _MODEL = None, base_url: PolicyBaseUrl = None, rollouts: _ROLL = None, mixture: _MIX = None,
    judge: _JUDGE = None, judge_model: _JM = None, judge_base_url: _JB = None, strategy: _STRAT = None,
    domain: _DOMAIN = None, limit: _LIMIT = None, out: OutDir = None, run_id: _RID = None,
    max_steps: _STEPS = None, settle: Settle = None, seed: _SEED = None, parallel: _PAR = 1,
    export: _EXPORT = None, config: Configs = None, preset: Preset = None, guides: _GUIDES = None,
    task_ids: Annotated[list[str] | None, Opt("--task", help="Only these suite tasks (repeatable).")] = None,
    network: Network = None, env: EnvKind = None, image: Image = None, verbose: _VERBOSE = False,
) -> None:
    """Run the local suite (on desktops of this machine unless --env says otherwise)."""
    opts = _common(model=model, base_url=base_url, env=env, image=image, out=out, run_id=run_id,
                   max_steps=max_steps, settle=settle, strategy=strategy, rollouts=rollouts, mixture=mixture,
                   judge=judge, judge_model=judge_model, judge_base_url=judge_base_url, seed=seed, network=network)
    list_file = LOCAL_LIST
    if task_ids:
        list_file = _subset_list(task_ids, Path(opts.get("out_dir") or "runs"))
    _bench("local", list_file, SUITE_DIR / "examples", opts, domain=domain, limit=limit, parallel=parallel,
           export=export, config=config, preset=preset, guides=guides, verbose=verbose)


def _subset_list(task_ids: list[str], out: Path) -> Path:
    """A task list of the suite holding only `task_ids` (written beside the runs)."""
    import json

    from environments.tasks import read_task_list

    full = read_task_list(LOCAL_LIST)
    chosen = {d: [t for t in ids if t in task_ids] for d, ids in full.items()}
    unknown = sorted(set(task_ids) - {t for ids in full.values() for t in ids})
    if unknown:
        raise fail(f"not local-suite tasks: {', '.join(unknown)}")
    out.mkdir(parents=True, exist_ok=True)
    path = out / f".suite-{'-'.join(sorted(task_ids))[:80]}.json"
    path.write_text(json.dumps({d: ids for d, ids in chosen.items() if ids}, indent=1))
    return path


@app.command("metrics")
def metrics_command(run_dir: Annotated[Path, typer.Argument(help="A run folder.")]) -> None:
    """Print (and rewrite summary.json with) a run's metrics per domain and cost per module."""
    layout = run_folder(run_dir)
    manifest = read_manifest(layout)
    metrics = compute_metrics(layout, manifest.domains if manifest else None)
    write_metrics(layout, metrics)
    typer.echo(format_metrics(metrics))
    typer.echo(label_line(layout))


@app.command("export")
def export_command(
    run_dir: Annotated[Path, typer.Argument(help="A run folder.")],
    root: Annotated[Path, typer.Argument(help="Where OSWorld's results layout is written.")],
    model: Annotated[str | None, Opt("--model", help="Model folder name (default: the rollout's policy).")] = None,
    action_space: Annotated[str, Opt("--action-space")] = "pyautogui",
    observation_type: Annotated[str, Opt("--observation-type")] = "screenshot",
) -> None:
    """Write each task's selected rollout in OSWorld's results layout."""
    layout = run_folder(run_dir)
    manifest = read_manifest(layout)
    try:
        report = export_osworld(layout, root, domains=manifest.domains if manifest else None, model=model,
                                action_space=action_space, observation_type=observation_type)
    except ExportError as e:
        raise fail(str(e)) from None
    for task_id, why in sorted({**report.skipped, **report.errored}.items()):
        typer.echo(f"left out {task_id}: {why}")
    for task_id, why in sorted(report.without_trajectory.items()):
        typer.echo(f"scored 0 without a trajectory {task_id}: {why}")
    typer.echo(f"exported {len(report.written)} tasks to {report.folder}")
    typer.echo(label_line(layout))
