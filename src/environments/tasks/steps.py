"""Setup and postconfig steps (`{type, parameters}`), run by OSWorld's own `SetupController`.

The project has no step implementations: each step goes to the pinned desktop-env's
``SetupController.setup([step])`` pointed at an `Endpoint` (a door to the desktop's server).
What this module adds around it:

* every step type is checked first (an unknown or refused type fails before anything runs);
* host files are made available the way the controller looks for them, since there is no
  network: a `download` URL is served from a local copy seeded into the cache under the
  controller's own name (`download_cache_name`), an `upload_file` ``local_path`` is resolved
  inside the task's folders; a missing file is one clear line, never a download;
* the controller's own connection check runs once, then each step is dispatched to its
  ``_<type>_setup`` method as ``SetupController.setup`` does, one at a time;
* a failed step stops the setup with one line naming task, step and type. The controller
  raises for some failures but only logs others (a launch or command the server refused, a
  window call that failed), so its ERROR log records, from this step's thread alone, count
  as a failure too;
* a command that ran but exited non-zero is no failure (OSWorld's controller goes on, and
  some steps are meant to fail harmlessly), but it is no silence either: `run_steps`
  returns one warning line per such step (task, step, exit status, the end of its stderr);
* an ``until`` condition is bounded (`UNTIL_LIMIT_S`; OSWorld waits for ever).
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from core.trajectory import SetupStep
from environments.tasks.context import TaskContext, download_cache_name, resolve_local
from environments.tasks.door import Endpoint
from environments.tasks.errors import TaskError, TaskRunError, UnsupportedStep
from environments.tasks.official import MissingScorer, python_controller_class, setup_controller_class
from environments.tasks.step_log import collect

__all__ = [
    "OFFICIAL_THREAD",
    "REFUSED_STEPS",
    "UNTIL_LIMIT_S",
    "official_step_types",
    "run_steps",
    "step_refusal",
    "step_supported",
]

T = TypeVar("T")

#: The name of the threads OSWorld's own code runs in (its prints and logs can be told apart by it).
OFFICIAL_THREAD = "osworld-official"
#: How long a step with an ``until`` condition may repeat before the setup fails.
UNTIL_LIMIT_S = 60.0
_log = logging.getLogger(__name__)

#: Step types OSWorld's controller has but this runner does not run, and why.
REFUSED_STEPS = {
    "tidy_desktop": "OSWorld's controller does not implement it",
    "act": "OSWorld's controller does not implement it",
    "replay": "OSWorld's controller does not implement it",
    "googledrive": "it needs a Google account and network access",
    "login": "it needs a website account and network access",
    "proxy": "it needs OSWorld's paid proxy pool and network access",
}
#: Steps that drive the desktop's browser over DevTools.
_BROWSER_STEPS = {"chrome_open_tabs", "chrome_close_tabs", "login"}
#: Steps whose failures the controller only logs (at ERROR) instead of raising.
_LOGGED_FAILURES = {"execute", "command", "launch", "activate_window", "close_window", "change_wallpaper"}


@functools.cache
def official_step_types() -> frozenset[str]:
    """Every step type OSWorld's `SetupController` defines (``_<type>_setup``)."""
    controller = setup_controller_class()
    return frozenset(
        name[1 : -len("_setup")]
        for name in dir(controller)
        if name.startswith("_") and name.endswith("_setup")
    )


def step_refusal(step_type: str, endpoint: Endpoint | None = None) -> str | None:
    """Why `step_type` cannot run here (None if it can); with an endpoint, also its reach."""
    try:
        known = official_step_types()
    except MissingScorer as exc:
        return str(exc)
    if step_type not in known:
        return f"OSWorld's setup controller has no step type {step_type!r}"
    if step_type in REFUSED_STEPS:
        return REFUSED_STEPS[step_type]
    if endpoint is not None and step_type in _BROWSER_STEPS and endpoint.browser_unreachable:
        return endpoint.browser_unreachable
    return None


def step_supported(step_type: str) -> bool:
    return step_refusal(step_type) is None


def check_steps(steps: Sequence[SetupStep], ctx: TaskContext, endpoint: Endpoint | None) -> None:
    for step in steps:
        reason = step_refusal(step.type, endpoint)
        if reason is not None:
            raise UnsupportedStep(
                ctx.task_id, step.type, sorted(official_step_types() - set(REFUSED_STEPS)), reason
            )


def _files(params: dict[str, Any]) -> list[dict[str, Any]]:
    files = params.get("files")
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        raise TaskRunError("parameter 'files' must be a list of objects")
    return files


def _host_side(step: SetupStep, ctx: TaskContext) -> dict[str, Any]:
    """The step's parameters with host files put where the controller reads them: a deep
    copy, since OSWorld's controller changes what it is given (its launch step appends the
    proxy flag to the command list) and the task record is shared by every rollout."""
    params = copy.deepcopy(step.parameters)
    if step.type == "download":
        for entry in _files(params):
            url, vm_path = str(entry["url"]), str(entry["path"])
            name = download_cache_name(url, vm_path)
            source = resolve_local(ctx, url, name)
            target = ctx.cache_path(name)
            if source != target:
                shutil.copyfile(source, target)
    elif step.type == "upload_file":
        params["files"] = [
            entry
            | {"local_path": str(resolve_local(ctx, str(entry["local_path"]), str(entry["local_path"])))}
            for entry in _files(params)
        ]
    elif step.type in ("execute", "command"):
        for key in ("stdout", "stderr"):
            if params.get(key):
                ctx.cache_path(str(params[key]))  # refuses names that climb out of the cache
    return params


async def in_daemon_thread(fn: Callable[[], T], *, limit: float | None = None, what: str = "call") -> T:
    """Run blocking official code in a daemon thread (one that outlives a time limit never blocks exit)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(value: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def work() -> None:
        try:
            value = fn()
        except BaseException as exc:  # handed to the awaiting task, which raises it
            loop.call_soon_threadsafe(deliver, None, exc)
        else:
            loop.call_soon_threadsafe(deliver, value, None)

    threading.Thread(target=work, name=OFFICIAL_THREAD, daemon=True).start()
    try:
        return await asyncio.wait_for(future, limit)
    except TimeoutError:
        raise TaskRunError(f"{what} did not finish within {limit:.0f} s") from None


def _controller(endpoint: Endpoint, ctx: TaskContext, steps: Sequence[SetupStep]) -> Any:
    if ctx.screen_size is None and any("{SCREEN_" in str(s.parameters.get("command", "")) for s in steps):
        size = python_controller_class()(endpoint.host, endpoint.port).get_vm_screen_size()
        if not size:
            raise TaskRunError(f"task {ctx.task_id}: the desktop did not tell its screen size")
        ctx.screen_size = (int(size["width"]), int(size["height"]))
    width, height = ctx.screen_size or (1920, 1080)
    return setup_controller_class()(
        vm_ip=endpoint.host,
        server_port=endpoint.port,
        chromium_port=endpoint.chromium_port,
        vlc_port=endpoint.vlc_port,
        cache_dir=str(ctx.cache_dir),
        client_password=ctx.client_password,
        screen_width=width,
        screen_height=height,
    )


def _probe(controller: Any) -> None:
    """OSWorld's own connection check (``setup([])`` polls ``/terminal``), once per run of steps."""
    if controller.setup([]) is False:
        raise TaskRunError(f"the controller server at {controller.http_server} did not answer")


def _run_one(controller: Any, step_type: str, params: dict[str, Any]) -> tuple[str | None, str | None]:
    """One step, dispatched as ``SetupController.setup`` does (``_<type>_setup(**parameters)``):
    (the first failure it raised or logged, a command's non-zero exit), each None when there
    is none. `_probe` did setup's connection check."""
    with collect() as log:
        try:
            getattr(controller, f"_{step_type}_setup")(**params)
        except TypeError as exc:
            return f"{type(exc).__name__}: {exc}", None
        except Exception as exc:
            return str(exc) or type(exc).__name__, None
    if step_type in _LOGGED_FAILURES and log.errors:
        return log.errors[0], None
    exited = next((r for r in log.replies if r.get("returncode") not in (0, None)), None)
    if exited is None:
        return None, None
    said = str(exited.get("error") or exited.get("output") or "").strip().splitlines()
    return None, f"exited {exited.get('returncode')}" + (f": {said[-1][:200]}" if said else "")


async def run_steps(
    endpoint: Endpoint, steps: Sequence[SetupStep], ctx: TaskContext, *, phase: str = "setup"
) -> list[str]:
    """Check every step first (so nothing runs for a refused task), then run them in order;
    returns a warning line for each command that ran but exited non-zero."""
    check_steps(steps, ctx, endpoint)
    warnings: list[str] = []
    if not steps:
        return warnings
    ctx.cache_dir.mkdir(parents=True, exist_ok=True)
    controller = await in_daemon_thread(functools.partial(_controller, endpoint, ctx, steps), what="setup")
    try:
        await in_daemon_thread(functools.partial(_probe, controller), what=f"task {ctx.task_id}: {phase}")
    except TaskRunError as exc:
        raise TaskRunError(f"task {ctx.task_id}: {phase} failed: {exc}") from None
    controller.use_proxy = ctx.use_proxy  # as `setup(config, use_proxy)` sets it (the probe reset it)
    for index, step in enumerate(steps):
        where = f"task {ctx.task_id}: {phase} step {index} ({step.type})"
        try:
            params = await asyncio.to_thread(_host_side, step, ctx)
        except KeyError as exc:
            raise TaskRunError(f"{where} lacks parameter {exc}") from None
        except TaskError as exc:
            if str(exc).startswith(f"task {ctx.task_id}:"):
                raise
            raise TaskRunError(f"{where} failed: {exc}") from exc
        limit = UNTIL_LIMIT_S if params.get("until") else None
        problem, exited = await in_daemon_thread(
            functools.partial(_run_one, controller, step.type, params), limit=limit, what=where
        )
        if exited is not None:
            warnings.append(f"{where} {exited}")
            _log.warning("%s %s", where, exited)
        if problem is not None:
            if "unexpected keyword argument" in problem or "missing 1 required" in problem:
                raise TaskRunError(f"{where} has wrong parameters: {problem.splitlines()[0]}")
            raise TaskRunError(f"{where} failed: {problem.splitlines()[0] if problem else 'no reason given'}")
    return warnings
