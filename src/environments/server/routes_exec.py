"""Running things: /execute (OSWorld's semantics), /action (warm executor), /run_* (code).

Deviations from OSWorld's server, all additive or safer: /execute also says whether the exit
was clean (`exited_ok`) and accepts an optional `timeout`; /run_bash_script answers (200)
after running instead of failing with 500, and a timeout is a 200 with `returncode: -1` and
`timed_out: true`, so OSWorld's controller (which retries non-200 replies) never runs a
script twice.

Fields that steer execution are checked strictly, since a lenient reading turns a client's
mistake into its opposite: `shell` is a JSON boolean or one of the strings OSWorld's task
files use, read as OSWorld's server reads them (`core.shell_flag`: ``"true"`` and
``"false"`` are non-empty strings, so both run through a shell), and a `timeout` must be a
finite number of seconds above zero and at most `MAX_TIMEOUT_S` (NaN, infinity or a
negative number would disable the limit). Any other value is a 400 naming the field.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import shlex
import tempfile
from typing import Any

from aiohttp import web

from core.protocols import ExecResult
from core.shell_flag import osworld_shell
from environments.server.bodies import bad_request, command_argv, expand_path, json_body
from environments.server.processes import run_captured
from environments.server.state import STATE, ServerState

__all__ = ["MAX_TIMEOUT_S", "routes"]

routes = web.RouteTableDef()

#: The longest `timeout` a request may ask for: one day.
MAX_TIMEOUT_S = 86_400.0


def timeout_field(data: dict[str, Any], default: float) -> float:
    """The request's `timeout` in seconds (`default` when absent or null); 400 unless it is
    a finite number in (0, MAX_TIMEOUT_S]."""
    value = data.get("timeout")
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise bad_request(f"timeout must be a number of seconds, not {type(value).__name__} {str(value)[:40]!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_TIMEOUT_S:
        raise bad_request(f"timeout must be a finite number of seconds above 0 and at most "
                          f"{MAX_TIMEOUT_S:g}, not {value!r}")
    return seconds


def shell_field(data: dict[str, Any]) -> bool:
    """`shell` as OSWorld's server reads it (`osworld_shell`); 400 for any other spelling."""
    try:
        return osworld_shell(data.get("shell"))
    except ValueError as exc:
        raise bad_request(str(exc)) from None


@routes.post("/execute")
@routes.post("/setup/execute")
async def execute(request: web.Request) -> web.Response:
    state = request.app[STATE]
    data = await json_body(request)
    shell = shell_field(data)
    timeout = timeout_field(data, state.config.execute_timeout)
    try:
        argv = command_argv(data.get("command", "" if shell else []), shell)
        done = await run_captured(
            argv, timeout=timeout, env=state.env, run_as=state.config.run_as, registry=state.registry
        )
    except (OSError, ValueError) as exc:
        return web.json_response({"status": "error", "message": str(exc)}, status=500)
    if done.timed_out:
        message = f"Command '{argv}' timed out after {timeout:g} seconds"
        return web.json_response({"status": "error", "message": message}, status=500)
    return web.json_response(
        {
            "status": "success",
            "output": done.stdout,
            "error": done.stderr,
            "returncode": done.returncode,
            "exited_ok": done.returncode == 0,
        }
    )


@routes.post("/action")
async def action(request: web.Request) -> web.Response:
    """Our own endpoint: one compiled pyautogui action in the warm executor."""
    state = request.app[STATE]
    data = await json_body(request)
    code = data.get("code")
    if not isinstance(code, str) or not code.strip():
        raise bad_request("code (a non-empty string) is required")
    result = await state.executor.run(code, timeout=timeout_field(data, 30.0))
    return web.json_response(
        {
            "status": result.status,
            "returncode": result.returncode,
            "stdout": result.stdout,
            "stderr": result.stderr,
        }
    )


async def _run_code(
    state: ServerState, language: str, code: str, timeout: float, cwd: str | None = None
) -> ExecResult:
    """Run code in the bwrap sandbox when configured, else as a plain child (like OSWorld)."""
    if state.sandbox is not None:
        if cwd is not None and language == "bash":
            code = f"cd -- {shlex.quote(cwd)} || exit 1\n{code}"
        return await state.sandbox.run("python" if language == "python" else "bash", code, timeout=timeout)
    suffix = ".py" if language == "python" else ".sh"
    fd, path = tempfile.mkstemp(prefix="agent_exec_", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(code)
        if state.config.run_as is not None:
            os.chown(path, state.config.run_as.uid, state.config.run_as.gid)
        argv = [state.python, path] if language == "python" else ["/bin/bash", path]
        done = await run_captured(
            argv,
            timeout=timeout,
            env=state.env,
            cwd=cwd,
            run_as=state.config.run_as,
            merge_stderr=language == "bash",
            registry=state.registry,
        )
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
    if done.timed_out:
        return ExecResult("timeout", -1, done.stdout, done.stderr)
    return ExecResult("ok" if done.returncode == 0 else "error", done.returncode, done.stdout, done.stderr)


def _code_field(data: dict[str, Any]) -> str:
    code = data.get("code")
    if not isinstance(code, str) or not code:
        raise web.HTTPBadRequest(
            text='{"status": "error", "message": "Code not supplied!"}', content_type="application/json"
        )
    return code


@routes.post("/run_python")
async def run_python(request: web.Request) -> web.Response:
    """OSWorld's shape: `return_code`, `message` = stdout + stderr, 500 on timeout."""
    state = request.app[STATE]
    data = await json_body(request)
    code = _code_field(data)
    result = await _run_code(state, "python", code, timeout_field(data, 30.0))
    if result.status == "timeout":
        return web.json_response(
            {
                "status": "error",
                "message": "Execution timeout: Code took too long to execute",
                "error": "TimeoutExpired",
                "need_more": False,
                "output": None,
                "timed_out": True,
            },
            status=500,
        )
    error = result.stderr or (f"Process exited with code {result.returncode}" if result.returncode else "")
    message = "\n".join(part for part in (result.stdout, error) if part)
    return web.json_response(
        {
            "status": "success" if result.returncode == 0 else "error",
            "message": message,
            "need_more": False,
            "output": result.stdout,
            "error": error,
            "return_code": result.returncode,
        }
    )


@routes.post("/run_python_script")
async def run_python_script(request: web.Request) -> web.Response:
    """The CoAct-1 server's shape: `returncode`, `duration`, always 200."""
    state = request.app[STATE]
    data = await json_body(request)
    code = _code_field(data)
    timeout = timeout_field(data, 90.0)
    loop_time = request.loop.time
    started = loop_time()
    result = await _run_code(state, "python", code, timeout)
    timed_out = result.status == "timeout"
    return web.json_response(
        {
            "status": "success" if result.ok else "error",
            "message": f"Execution timed out after {timeout:g} seconds" if timed_out else "",
            "output": result.stdout,
            "error": result.stderr,
            "returncode": result.returncode,
            "duration": round(loop_time() - started, 3),
            "timed_out": timed_out,
        }
    )


@routes.post("/run_bash_script")
async def run_bash_script(request: web.Request) -> web.Response:
    """OSWorld's shape (stderr merged into `output`, `error` empty), fixed to answer 200."""
    state = request.app[STATE]
    data = await json_body(request)
    script = data.get("script")
    if not isinstance(script, str) or not script:
        return _bash_reply("error", "Script not supplied!", -1, http_status=400)
    timeout = timeout_field(data, 100.0)
    working_dir = data.get("working_dir") or None
    if working_dir is not None:
        working_dir = expand_path(str(working_dir))
        if not await asyncio.to_thread(os.path.isdir, working_dir):
            return _bash_reply(
                "error", f"Working directory does not exist: {working_dir}", -1, http_status=400
            )
    if "#!/bin/bash" not in script:
        script = "#!/bin/bash\n\n" + script
    if state.sandbox is not None:
        script = "exec 2>&1\n" + script
    result = await _run_code(state, "bash", script, timeout, cwd=working_dir)
    output = result.stdout + result.stderr
    if result.status == "timeout":
        output += f"\nScript execution timed out after {timeout:g} seconds"
        return _bash_reply("error", output, -1, timed_out=True)
    return _bash_reply("success" if result.returncode == 0 else "error", output, result.returncode)


def _bash_reply(
    status: str, output: str, returncode: int, *, http_status: int = 200, timed_out: bool = False
) -> web.Response:
    return web.json_response(
        {"status": status, "output": output, "error": "", "returncode": returncode, "timed_out": timed_out},
        status=http_status,
    )
