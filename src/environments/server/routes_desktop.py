"""The screen and its windows: screenshot, sizes, pointer, platform, launch, open, windows."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

from aiohttp import web

from environments.server.app_names import equivalent_argv
from environments.server.bodies import command_argv, expand_path, json_body
from environments.server.processes import run_captured
from environments.server.routes_exec import shell_field, timeout_field
from environments.server.state import STATE, ServerState

__all__ = ["routes"]

routes = web.RouteTableDef()
_PLATFORM_NAMES = {"ubuntu": "Linux", "windows": "Windows"}


@routes.get("/screenshot")
async def screenshot(request: web.Request) -> web.Response:
    png = await request.app[STATE].capture.png()
    return web.Response(body=png, content_type="image/png")


@routes.get("/screen_size")
@routes.post("/screen_size")
async def screen_size(request: web.Request) -> web.Response:
    width, height = await request.app[STATE].capture.size()
    return web.json_response({"width": width, "height": height})


@routes.get("/cursor_position")
async def cursor_position(request: web.Request) -> web.Response:
    x, y = await request.app[STATE].capture.pointer()
    return web.json_response([x, y])


@routes.get("/platform")
async def platform_name(request: web.Request) -> web.Response:
    return web.Response(text=_PLATFORM_NAMES[request.app[STATE].config.platform])


@routes.post("/setup/launch")
async def launch(request: web.Request) -> web.Response:
    state = request.app[STATE]
    data = await json_body(request)
    shell = shell_field(data)
    command = data.get("command", "" if shell else [])
    try:
        argv = command_argv(command, shell)
        if not shell:
            argv = equivalent_argv(argv, state.env.get("PATH"))
        state.launch(argv)
    except (OSError, ValueError) as exc:
        return web.json_response({"status": "error", "message": str(exc)}, status=500)
    shown = command if shell else " ".join(argv)
    return web.Response(text=f"{shown} launched successfully")


async def _windows(state: ServerState) -> list[tuple[str, str]]:
    """(id, title) of each managed window, from `wmctrl -l`."""
    done = await run_captured(["wmctrl", "-l"], timeout=10.0, env=state.env)
    windows = []
    for line in done.stdout.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3:
            windows.append((parts[0], parts[3] if len(parts) == 4 else ""))
    return windows


#: What xdg-open's exit statuses mean (xdg-utils documents 1-4); 126/127 come from a
#: wrapper (setpriv, a shell) that could not run the program.
_EXIT_MEANINGS = {
    1: "bad command line",
    2: "the file does not exist",
    3: "no application is set up for this kind of file (set one in ~/.config/mimeapps.list)",
    4: "the application failed to start",
    126: "the program is not executable",
    127: "the program was not found",
}
_POLL_S = 0.25


async def _raise_window(state: ServerState, names: tuple[str, str]) -> bool:
    """Activate the first window whose title shows one of `names`; False when there is none."""
    for window_id, title in await _windows(state):
        if names[0] in title or names[1] in title:
            await run_captured(["wmctrl", "-i", "-a", window_id], timeout=10.0, env=state.env)
            return True
    return False


def _launcher_failure(returncode: int) -> str:
    if returncode < 0:
        return f"it was killed by signal {-returncode}"
    meaning = _EXIT_MEANINGS.get(returncode, "see the desktop's logs")
    return f"it exited with status {returncode}: {meaning}"


@routes.post("/setup/open_file")
async def open_file(request: web.Request) -> web.Response:
    """Open a file (xdg-open) or start a command, then wait for its window and raise it.

    Waits only while a window can still come: a launcher that is missing, or that exits
    non-zero with no window shown, fails the request at once instead of after the timeout.
    """
    state = request.app[STATE]
    data = await json_body(request)
    raw = data.get("path")
    if not raw:
        return web.Response(text="Path not supplied!", status=400)
    path = Path(expand_path(str(raw)))
    timeout = timeout_field(data, state.config.open_file_timeout)
    if await asyncio.to_thread(path.exists):
        argv, names = ["xdg-open", str(path)], (path.name, path.stem)
    elif shutil.which(str(raw)):
        argv, names = [str(raw)], (str(raw), str(raw))
    else:
        return web.Response(text=f"Application/file not found: {raw}", status=404)
    if shutil.which(argv[0], path=state.env.get("PATH", os.defpath)) is None:
        hint = " (install the xdg-utils package)" if argv[0] == "xdg-open" else ""
        return web.Response(text=f"Failed to open {raw}. Error: {argv[0]} is not installed{hint}", status=500)
    try:
        launcher = state.launch(argv)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            returncode = launcher.poll()
            if await _raise_window(state, names):
                return web.Response(text="File opened and window activated successfully")
            if returncode is not None and returncode != 0:
                failure = _launcher_failure(returncode)
                return web.Response(
                    text=f"Failed to open {raw}. Error: {argv[0]} opened no window; {failure}", status=500
                )
            await asyncio.sleep(_POLL_S)
    except OSError as exc:
        return web.Response(text=f"Failed to open {raw}. Error: {exc}", status=500)
    return web.Response(text=f"Failed to find window for {names[0]} within {timeout:g} seconds.", status=500)


async def _window_command(request: web.Request, verb: str) -> tuple[ServerState, list[str]] | web.Response:
    state = request.app[STATE]
    data = await json_body(request)
    name = data.get("window_name")
    if not name:
        return web.Response(text="window_name required", status=400)
    by_class = bool(data.get("by_class", False))
    strict = bool(data.get("strict", False))
    if shutil.which("wmctrl"):
        flags = "-" + ("x" if by_class else "") + ("F" if strict else "") + verb
        return state, ["wmctrl", flags, str(name)]
    action = "windowactivate" if verb == "a" else "windowclose"
    selector = "--class" if by_class else "--name"
    pattern = f"^{name}$" if strict else str(name)
    return state, ["xdotool", "search", "--limit", "1", selector, pattern, action]


@routes.post("/setup/activate_window")
async def activate_window(request: web.Request) -> web.Response:
    prepared = await _window_command(request, "a")
    if isinstance(prepared, web.Response):
        return prepared
    state, argv = prepared
    await run_captured(argv, timeout=10.0, env=state.env)
    return web.Response(text="Window activated successfully")


@routes.post("/setup/close_window")
async def close_window(request: web.Request) -> web.Response:
    prepared = await _window_command(request, "c")
    if isinstance(prepared, web.Response):
        return prepared
    state, argv = prepared
    await run_captured(argv, timeout=10.0, env=state.env)
    return web.Response(text="Window closed successfully.")
