"""OSWorld's remaining desktop endpoints: desktop path, window size, wallpaper, verified execute.

Request and response shapes are OSWorld's (../shared/reference/osworld.md §1.3). Where its
server gives no answer (a window that does not exist, a wallpaper that is not a file) these
say so with a 404 and one line instead of an empty 500.

The wallpaper lives where GNOME keeps it (`org.gnome.desktop.background picture-uri`, via
`gsettings`, so the desktop's keyfile backend persists it) and is painted on the root window,
since the local desktops' window manager draws none.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

from aiohttp import web

from environments.server import x11_windows
from environments.server.bodies import command_argv, expand_path, json_body
from environments.server.processes import Completed, run_captured
from environments.server.routes_exec import shell_field
from environments.server.state import STATE, ServerState

__all__ = ["routes"]

routes = web.RouteTableDef()
_SCHEMA = "org.gnome.desktop.background"
_GSETTINGS_MISSING = "gsettings is not installed; install libglib2.0-bin and gsettings-desktop-schemas"


@routes.post("/desktop_path")
async def desktop_path(request: web.Request) -> web.Response:
    state = request.app[STATE]
    path = Path(state.env.get("HOME") or "/") / "Desktop"
    if not await asyncio.to_thread(path.is_dir):
        return web.json_response({"error": f"no desktop folder at {path}"}, status=404)
    return web.json_response({"desktop_path": str(path)})


@routes.post("/window_size")
async def window_size(request: web.Request) -> web.Response:
    """Form field `app_class_name` (OSWorld's controller posts it as a form)."""
    state = request.app[STATE]
    form = await request.post()
    name = form.get("app_class_name")
    if not isinstance(name, str) or not name:
        return web.json_response({"error": "app_class_name is required"}, status=400)
    size = await asyncio.to_thread(x11_windows.window_size, state.env, name)
    if size is None:
        return web.json_response({"error": f"no window of class {name}"}, status=404)
    return web.json_response({"width": size[0], "height": size[1]})


async def _gsettings(state: ServerState, *args: str) -> Completed:
    if shutil.which("gsettings", path=state.env.get("PATH", os.defpath)) is None:
        raise RuntimeError(_GSETTINGS_MISSING)
    return await run_captured(
        ["gsettings", *args], timeout=10.0, env=state.env, run_as=state.config.run_as, registry=state.registry
    )


def _uri_path(value: str) -> Path | None:
    """`'file:///a%20b.png'` (gsettings' quoted output) → /a b.png; None for non-file URIs."""
    uri = value.strip().strip("'\"")
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if uri.startswith("/"):
        return Path(uri)
    return None


@routes.post("/wallpaper")
async def wallpaper(request: web.Request) -> web.StreamResponse:
    """The current wallpaper's file (OSWorld sends it as image/png whatever its format)."""
    state = request.app[STATE]
    done = await _gsettings(state, "get", _SCHEMA, "picture-uri")
    if done.returncode != 0:
        return web.json_response({"error": f"gsettings failed: {done.stderr.strip()}"}, status=500)
    path = _uri_path(done.stdout)
    if path is None or not await asyncio.to_thread(path.is_file):
        return web.json_response({"error": f"the wallpaper is not a file: {done.stdout.strip()}"}, status=404)
    body = await asyncio.to_thread(path.read_bytes)
    return web.Response(body=body, content_type="image/png")


@routes.post("/setup/change_wallpaper")
async def change_wallpaper(request: web.Request) -> web.Response:
    """JSON `path`: record it as GNOME's wallpaper and paint it on the root window."""
    state = request.app[STATE]
    data = await json_body(request)
    raw = data.get("path")
    if not raw:
        return web.Response(text="Path not supplied!", status=400)
    path = Path(expand_path(str(raw)))
    if not await asyncio.to_thread(path.is_file):
        return web.Response(text=f"File not found: {path}", status=404)
    uri = (await asyncio.to_thread(path.resolve)).as_uri()
    for key in ("picture-uri", "picture-uri-dark"):
        done = await _gsettings(state, "set", _SCHEMA, key, uri)
        if done.returncode != 0 and key == "picture-uri":
            return web.Response(text=f"Failed to set wallpaper: {done.stderr.strip()}", status=500)
    try:
        await asyncio.to_thread(x11_windows.paint_root, state.env, path)
    except OSError as exc:
        return web.Response(text=f"Failed to paint wallpaper {path}: {exc}", status=500)
    return web.Response(text="Wallpaper changed successfully")


async def _window_exists(state: ServerState, title: str) -> bool:
    try:
        listing = await run_captured(["wmctrl", "-l"], timeout=5.0, env=state.env)
    except OSError:
        return False
    return listing.returncode == 0 and title.lower() in listing.stdout.lower()


async def _command_succeeds(state: ServerState, command: str) -> bool:
    done = await run_captured(
        ["/bin/sh", "-c", command],
        timeout=5.0,
        env=state.env,
        run_as=state.config.run_as,
        registry=state.registry,
    )
    return not done.timed_out and done.returncode == 0


@routes.post("/execute_with_verification")
@routes.post("/setup/execute_with_verification")
async def execute_with_verification(request: web.Request) -> web.Response:
    """Run a command like /execute, then poll `verification` until it holds or time runs out.

    `verification` may hold `window_exists` (a title substring, `wmctrl -l`) and
    `command_success` (a shell command that must exit 0 within 5 s); all given must hold.
    """
    state = request.app[STATE]
    data = await json_body(request)
    shell = shell_field(data)
    verification = data.get("verification") or {}
    if not isinstance(verification, dict):
        return web.json_response({"status": "error", "message": "verification must be an object"}, status=400)
    max_wait = float(data.get("max_wait_time", 10))
    interval = max(float(data.get("check_interval", 1)), 0.05)
    try:
        argv = command_argv(data.get("command", "" if shell else []), shell)
        done = await run_captured(
            argv,
            timeout=state.config.execute_timeout,
            env=state.env,
            run_as=state.config.run_as,
            registry=state.registry,
        )
    except (OSError, ValueError) as exc:
        return web.json_response({"status": "error", "message": str(exc)}, status=500)
    if done.timed_out:
        message = f"Command '{argv}' timed out after {state.config.execute_timeout:g} seconds"
        return web.json_response({"status": "error", "message": message}, status=500)
    reply: dict[str, object] = {"output": done.stdout, "error": done.stderr, "returncode": done.returncode}
    if not verification:
        return web.json_response({"status": "success", **reply})
    started = time.monotonic()
    while time.monotonic() - started < max_wait:
        window = verification.get("window_exists")
        command = verification.get("command_success")
        passed = (window is None or await _window_exists(state, str(window))) and (
            command is None or await _command_succeeds(state, str(command))
        )
        if passed:
            waited = time.monotonic() - started
            return web.json_response(
                {"status": "success", **reply, "verification": "passed", "wait_time": waited}
            )
        await asyncio.sleep(interval)
    failed = {"status": "verification_failed", **reply, "verification": "failed", "wait_time": max_wait}
    return web.json_response(failed, status=500)
