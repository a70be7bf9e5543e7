"""``agent-s3 run``: one task, one strategy, live progress and the outcome.

``agent-s3 run --task mousepad-append-line --model openai/gpt-5`` starts a local desktop,
sets the task up, runs one rollout with live progress, evaluates it, prints the outcome
and the run folder, and stops the desktop (on Ctrl-C too). An existing ``--run-id`` is
refused unless ``--resume`` (keep what it finished, redo the rest) or ``--overwrite``
(start afresh) says which is meant; see `runner.run_folder`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from bjudge import JUDGES
from core.config import ConfigError, dump_config
from core.llm import Ledger, MissingAPIKeyError, UnknownProviderError, is_scripted
from core.llm.notices import watching_retries
from core.protocols import EnvError
from core.trajectory import WORLD_FAILURES, RunLayout, Task, check_name
from environments.kinds import get_kind
from gprm import GUIDES
from themis import CRITICS

from ..bench import resuming_strategy, rollouts_per_task
from ..config import RunConfig, load_run_config
from ..demo_policy import DEMO_MODEL, DEMO_NOTE, register_demo
from ..executors import check_executor, open_environments
from ..guided import check_guide
from ..models import ModelSet, build_models, settled_config
from ..module_errors import ErrorTally, summarize_errors
from ..noop_policy import NOOP_NOTE, is_noop, register_noop
from ..presets import with_preset
from ..pricing import check_prices, unpriced_line
from ..progress import RetryPrinter, StepPrinter
from ..resume import task_finished
from ..retry import RetryUntilSuccess
from ..run_folder import FolderUse, check_run_folder, open_run_folder
from ..run_log import official_output_to_log, run_log
from ..running import run_async, with_simulation_label
from ..strategies import STRATEGIES
from ..strategy import RolloutOutcome, Strategy, TaskRun, check_strategy, strategy_class
from ..task_errors import summarize_task_errors
from ..tasks import check_task_platform, resolve_task
from ..terminal import SafeConsole
from .errors import fail
from .models import check_models
from .options import (
    AdbHost,
    AdbPort,
    Configs,
    EnvKind,
    Image,
    Network,
    OutDir,
    PolicyBaseUrl,
    Preset,
    Settle,
    Token,
    Url,
    environment_overrides,
    option_overrides,
)
from .wide import missing_key_line, prepare_wide, run_wide, summarize

__all__ = ["run"]

_T = TypeVar("_T")


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def run(
    task: Annotated[str, typer.Option("--task", "-t", help="A task.json file, a local-suite task id, or a quoted instruction.")],
    model: Annotated[str | None, typer.Option("--model", "-m", help="Policy model as provider/model (scripted/demo: the scripted demo policy).")] = None,
    base_url: PolicyBaseUrl = None, env: EnvKind = None, url: Url = None, token: Token = None,
    image: Image = None, adb_host: AdbHost = None, adb_port: AdbPort = None, config: Configs = None,
    preset: Preset = None, out: OutDir = None,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the run folder (default: the time).")] = None,
    max_steps: Annotated[int | None, typer.Option("--max-steps", help="Step budget of the rollout.")] = None,
    settle: Settle = None, network: Network = None,
    strategy: Annotated[str | None, typer.Option("--strategy", help=STRATEGIES.help("How the task is run: "))] = None,
    attempts: Annotated[int | None, typer.Option("--attempts", min=1, help="With --strategy retry: rollouts at most.")] = None,
    critic: Annotated[str | None, typer.Option("--critic", help=CRITICS.help("With --strategy retry: "))] = None,
    critic_model: Annotated[str | None, typer.Option("--critic-model", help="The critic's model as provider/model (default: the policy's).")] = None,
    rollouts: Annotated[int | None, typer.Option("--rollouts", min=1, help="Wide scaling: N rollouts in parallel and a judge.")] = None,
    mixture: Annotated[str | None, typer.Option("--mixture", help="Wide scaling: provider/model*count,... or a YAML file.")] = None,
    judge: Annotated[str | None, typer.Option("--judge", help=JUDGES.help("Wide scaling: ", extra=("none",)))] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="Wide scaling: the judge's model as provider/model (default: the policy's).")] = None,
    narrator_model: Annotated[str | None, typer.Option("--narrator-model", help="Wide scaling: the model writing the facts (default: the judge's).")] = None,
    guide: Annotated[str | None, typer.Option("--guide", help=GUIDES.help("Step guide: ", extra=("none",)))] = None,
    candidates: Annotated[int | None, typer.Option("--candidates", min=1, max=8, help="With --guide: candidate actions per step (K).")] = None,
    guide_model: Annotated[str | None, typer.Option("--guide-model", help="The guide's model as provider/model (default: the policy's).")] = None,
    branch_at: Annotated[int | None, typer.Option("--branch-at", min=1, help="With --strategy branch: steps of the shared prefix before the checkpoint (T).")] = None,
    branches: Annotated[int | None, typer.Option("--branches", min=1, help="With --strategy branch: rollouts continuing from the checkpoint (K).")] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="asyncio (in this process, the default) or ray (environments on the hosts of a Ray cluster).")] = None,
    ray_address: Annotated[str | None, typer.Option("--ray-address", help="With --executor ray: local (start Ray here), auto (this machine's cluster) or ray://HEAD:10001.")] = None,
    resume: Annotated[bool, typer.Option("--resume", help="The --run-id exists: keep the rollouts it finished and run the rest.")] = False,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="The --run-id exists: delete that run folder and start afresh.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also show OSWorld's own log lines on the terminal (they always go to the run folder's run.log).")] = False,
) -> None:
    """Run one task: set it up, run a rollout with live progress, evaluate, report."""
    console = SafeConsole(highlight=False)
    given = option_overrides(
        policy__model=model, policy__base_url=base_url, out_dir=str(out) if out else None, run_id=run_id,
        **environment_overrides(kind=env, url=url, token=token, image=image, adb_host=adb_host, adb_port=adb_port,
                                network=network),
        rollout__max_steps=max_steps, rollout__settle_seconds=settle,
        strategy=strategy or ("wide" if rollouts or mixture else None),
        critic__attempts=attempts, critic__name=critic, critic__model__model=critic_model,
        wide__rollouts=rollouts, wide__mixture=mixture, wide__judge=judge,
        wide__judge_model__model=judge_model, wide__narrator_model__model=narrator_model,
        guide__name=guide, guide__candidates=candidates, guide__model__model=guide_model,
        branch__at=branch_at, branch__branches=branches,
        executor__kind=executor or ("ray" if ray_address else None), executor__ray_address=ray_address,
    )  # fmt: skip
    cfg, the_task, layout, use, unpriced = _prepare(task, [*with_preset(preset, config), given],
                                                    resume=resume, overwrite=overwrite)
    resumed = use == "resume"
    if resumed and task_finished(layout, the_task, rollouts_per_task(cfg)):
        console.print(f"[bold]resumed[/bold] {escape(the_task.id)} had already finished: nothing to run. "
                      f"Files: {layout.path} (agent-s3 report {layout.path} rewrites report.html)")
        return
    ledger, models = _open_run(cfg, layout, use)
    _header(console, cfg, the_task, layout, unpriced=unpriced, resumed=resumed)
    if strategy_class(cfg).board:
        wide = _run_task(console, cfg, layout, lambda: run_wide(cfg, the_task, layout, models, ledger, console, resume=resumed),
                         verbose=verbose, stops="the desktops were")
        summarize(console, cfg, the_task, wide, layout)
    else:
        outcome = _run_task(console, cfg, layout, lambda: _run(cfg, the_task, layout, models, ledger, console, resume=resumed),
                            verbose=verbose, stops="the desktop was")
        _report(console, cfg, the_task, outcome, ledger, layout)
    _exit_on_errors(console, cfg, layout)


def _prepare(task: str, layers: list[Any], *, resume: bool,
             overwrite: bool) -> tuple[RunConfig, Task, RunLayout, FolderUse, list[str]]:
    """The run's configuration, task and folder, every setting checked before anything starts:
    a bad value, task or folder is one line. Also the models without a price (said once)."""
    try:
        cfg = load_run_config(layers)
        the_task = resolve_task(task, platform=get_kind(cfg.environment.kind).platform)
        check_task_platform(cfg.environment.kind, the_task)
        if cfg.policy.model == DEMO_MODEL:
            register_demo(the_task.id)
            cfg = cfg.model_copy(update={"label": cfg.label or DEMO_NOTE})
        elif is_noop(cfg.policy.model):
            register_noop(cfg.policy.model)
            cfg = cfg.model_copy(update={"label": cfg.label or NOOP_NOTE})
        rid = check_name("run id", cfg.run_id or _new_run_id())
        cfg.environment.check()
        check_strategy(cfg)
        check_guide(cfg)
        check_executor(cfg)
        check_models(cfg)
        cfg = with_simulation_label(prepare_wide(cfg))
        unpriced = check_prices(cfg)
        layout = RunLayout(cfg.out_dir, rid, durable=cfg.durable)
        use = check_run_folder(layout, the_task.id, cfg.strategy, resume=resume, overwrite=overwrite)
    except (ConfigError, EnvError, KeyError, ValueError) as e:
        raise fail(str(e).strip('"')) from None
    return cfg, the_task, layout, use, unpriced


def _open_run(cfg: RunConfig, layout: RunLayout, use: FolderUse) -> tuple[Ledger, ModelSet]:
    """The run folder, its ledger and the run's models; the folder is made only once the models
    are (a missing key leaves nothing behind), an overwritten one is emptied before its ledger
    is read. A missing key says which variable to set, or how to run without one."""
    if use == "overwrite":  # before the ledger reads the old run's calls
        open_run_folder(layout, use)
    ledger = Ledger(layout.ledger_path)
    try:
        models = build_models(cfg, ledger)
    except MissingAPIKeyError as e:
        raise fail(
            f"{cfg.policy.model} needs an API key: set {e.variable} "
            f"(or run the scripted demo policy with --model {DEMO_MODEL}, or end any task at once with "
            "--model scripted/noop)"
        ) from None
    except UnknownProviderError as e:
        raise fail(str(e)) from None
    if use != "overwrite":  # made only once the run is sure to start
        open_run_folder(layout, use)
    return ledger, models


def _run_task(console: Console, cfg: RunConfig, layout: RunLayout, work: Callable[[], Coroutine[Any, Any, _T]], *,
              verbose: bool, stops: str) -> _T:
    """The task's run on the event loop, logged to the run folder. Ctrl-C stops the desktops
    (`stops` says which, exit 130); a missing key or an environment that fails is one line."""
    try:
        with run_log(layout.path, verbose=verbose):
            return run_async(cfg, work())
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted[/yellow]; {stops} stopped. Files so far: {layout.path}")
        raise typer.Exit(code=130) from None
    except MissingAPIKeyError as e:
        raise fail(missing_key_line(e)) from None
    except EnvError as e:
        raise fail(f"{e} (run folder: {layout.path})") from None


def _exit_on_errors(console: Console, cfg: RunConfig, layout: RunLayout) -> None:
    """Say whether the task errored (its setup or scorer failed) and the failures per module;
    exit `EXIT_TASK_ERRORS` for the first, `EXIT_MODULE_ERRORS` past `max_module_error_share`."""
    task_status = summarize_task_errors(console, layout)
    status = summarize_errors(console, layout, cfg.max_module_error_share)
    if task_status or status:
        raise typer.Exit(code=task_status or status)


async def _run(cfg: RunConfig, task: Task, layout: RunLayout, models: ModelSet, ledger: Ledger,
               console: Console, *, resume: bool = False) -> RolloutOutcome:
    hide = (str(cfg.out_dir.resolve()),)
    strategy: Strategy | None = None
    try:
        async with open_environments(cfg, hide=hide, run_id=layout.run_id) as pool:
            # Record the worker as this environment runs it (platform, facts, how apps open).
            env = await pool.acquire()
            shown = await settled_config(cfg, env)
            pool.release(env)
            await asyncio.to_thread(layout.write_config, dump_config(shown))
            strategy = resuming_strategy(cfg) if resume else STRATEGIES.get(cfg.strategy)()
            run = TaskRun(task=task, layout=layout, config=cfg, pool=pool, models=models, ledger=ledger,
                          hooks=[StepPrinter(console, tally=ErrorTally(), ledger=ledger)])
            with console.status(f"running {task.id} ...", spinner="dots"), official_output_to_log(), \
                    watching_retries(RetryPrinter(console)):
                await strategy(run)
            if isinstance(strategy, RetryUntilSuccess):
                for attempt in strategy.history[task.id]:
                    console.print(f"[bold]retry[/bold] {escape(attempt.describe())}")
            outcome: RolloutOutcome = strategy.outcomes[task.id]
            return outcome
    finally:
        if isinstance(strategy, RetryUntilSuccess):
            await strategy.aclose()
        await models.aclose()


def _header(console: Console, cfg: RunConfig, task: Task, layout: RunLayout, *, unpriced: list[str],
            resumed: bool) -> None:
    """What runs, on what, where its files go; models without a price; what a resume keeps."""
    console.print(f"[bold]task[/bold] {escape(task.id)}: {escape(task.instruction)}")
    console.print(f"[bold]model[/bold] {escape(cfg.policy.model)} on {escape(cfg.environment.where())}")
    if is_scripted(cfg.policy.model):
        console.print(f"[bold yellow]SCRIPTED[/bold yellow] {escape(cfg.label or 'scripted replies, not a model')}")
    if cfg.label and "SIMULATED" in cfg.label:
        console.print(f"[bold yellow]SIMULATED[/bold yellow] {escape(cfg.label)}")
    console.print(f"[bold]run folder[/bold] {layout.path}")
    if unpriced:
        console.print(f"[bold yellow]warning[/bold yellow] {escape(unpriced_line(unpriced))}")
    if resumed:
        console.print(f"[bold]resumed[/bold] keeping the rollouts run {escape(layout.run_id)} finished; running the rest")


def _report(console: Console, cfg: RunConfig, task: Task, outcome: RolloutOutcome, ledger: Ledger,
            layout: RunLayout) -> None:
    result = outcome.result
    colour = "green" if result.status == "done" else "red" if result.status in WORLD_FAILURES else "yellow"
    console.print(f"[bold]outcome[/bold] [{colour}]{result.status}[/{colour}] after {result.steps} steps "
                  f"in {result.seconds:.1f} s: {escape(result.reason)}")
    if outcome.score is not None:
        console.print(f"[bold]score[/bold] {outcome.score:g} (the task's evaluator)")
    elif outcome.error is not None:
        why = f": {escape(outcome.error.reason)}" if outcome.error.outcome == "scoring_failed" else ""
        console.print(f"[bold]score[/bold] [red]none: {outcome.error.outcome}[/red], an error of the task or the "
                      f"environment, not a score{why}")
    else:
        console.print("[bold]score[/bold] none (the task has no evaluator, or the rollout did not finish)")
    total = ledger.total()
    console.print(f"[bold]model calls[/bold] {total.calls}, {total.input_tokens} in / {total.output_tokens} out "
                  f"tokens, ${total.dollars:.4f}")
    if is_scripted(cfg.policy.model):
        console.print("[bold yellow]SCRIPTED[/bold yellow] the policy was scripted; this run says nothing of a model")
    console.print(f"[bold]files[/bold] {layout.path} (result: {layout.task(task.id).path / 'result.json'})")
