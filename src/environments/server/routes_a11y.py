"""The accessibility tree (`GET /accessibility`) and terminal text (`GET /terminal`) over AT-SPI.

Both are answered by the server's long-lived walker (`atspi_worker.AtspiWorker`: the
bindings imported and the bus connected once), so ``/terminal``, which OSWorld's setup
controller polls before every setup, costs what OSWorld's does, and a hung accessibility
bus never blocks the server. A platform with no AT-SPI answers `/accessibility` with 501 and
one line saying what to install; `/terminal` then answers OSWorld's shape with `output: null`.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from environments.server.atspi_worker import ATSPI_PYTHON_ENV, NoAccessibility
from environments.server.state import STATE, ServerState

__all__ = ["ATSPI_PYTHON_ENV", "NoAccessibility", "routes", "walk"]

routes = web.RouteTableDef()
_WALK_TIMEOUT_S = 60.0
_TERMINAL_TIMEOUT_S = 10.0


async def walk(state: ServerState, mode: str) -> dict[str, Any]:
    """The walker's reply to `mode` (`tree` or `terminal`)."""
    if state.config.platform != "ubuntu":
        raise NoAccessibility(f"no AT-SPI accessibility tree on platform {state.config.platform}")
    if not state.env.get("DBUS_SESSION_BUS_ADDRESS"):
        # Without one libdbus would autolaunch a session bus that outlives the request.
        raise NoAccessibility(
            "no D-Bus session (DBUS_SESSION_BUS_ADDRESS is unset); AT-SPI needs the desktop's bus"
        )
    reply = await state.atspi.ask(mode, timeout=_TERMINAL_TIMEOUT_S if mode == "terminal" else _WALK_TIMEOUT_S)
    if "error" in reply:
        raise NoAccessibility(str(reply["error"]))
    return reply


@routes.get("/accessibility")
async def accessibility(request: web.Request) -> web.Response:
    state = request.app[STATE]
    try:
        reply = await walk(state, "tree")
    except NoAccessibility as exc:
        return web.json_response({"status": "error", "message": str(exc)}, status=501)
    return web.json_response({"AT": reply["AT"]})


@routes.get("/terminal")
async def terminal(request: web.Request) -> web.Response:
    """Text of gnome-terminal's focused terminal in its active window (null when there is none)."""
    state = request.app[STATE]
    try:
        reply = await walk(state, "terminal")
    except NoAccessibility:
        return web.json_response({"output": None, "status": "success"})
    except RuntimeError as exc:
        return web.json_response({"status": "error", "message": str(exc)}, status=500)
    return web.json_response({"output": reply.get("output"), "status": "success"})
