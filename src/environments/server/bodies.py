"""Request parsing shared by the handlers: JSON bodies read the way OSWorld's server reads them."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from typing import Any

from aiohttp import web

__all__ = [
    "BODY_TIMEOUT_S",
    "bad_request",
    "command_argv",
    "expand_args",
    "expand_path",
    "json_body",
]




def bad_request(message: str) -> web.HTTPBadRequest:
    return web.HTTPBadRequest(
        text=json.dumps({"status": "error", "message": message}), content_type="application/json"
    )


#: How long a JSON body may take to arrive once its headers have: these bodies are small, so
#: a client that trickles one holds a handler (and its memory) for nothing.
BODY_TIMEOUT_S = 20.0


async def json_body(request: web.Request) -> dict[str, Any]:
    """The JSON object in the body (any content type); 400 if it is not one, 408 if it does
    not arrive within `BODY_TIMEOUT_S`."""
    try:
        async with asyncio.timeout(BODY_TIMEOUT_S):
            raw = await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            text=json.dumps({"status": "error", "message": f"the body did not arrive within {BODY_TIMEOUT_S:g} s"}),
            content_type="application/json",
        ) from None
    try:
        data = json.loads(raw or b"{}")
    except ValueError as exc:
        raise bad_request(f"body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise bad_request("body must be a JSON object")
    return data


def expand_path(path: str) -> str:
    """`~` and `$VARS` expanded, as OSWorld's file endpoints do."""
    return os.path.expandvars(os.path.expanduser(path))


def expand_args(command: list[object]) -> list[str]:
    """Arguments as strings, a leading `~/` expanded (OSWorld's rule for command lists)."""
    return [os.path.expanduser(a) if isinstance(a, str) and a.startswith("~/") else str(a) for a in command]


def command_argv(command: Any, shell: bool) -> list[str]:
    """OSWorld's rules: shlex-split a string unless `shell`, expand leading `~/`."""
    if shell:
        parts = [command] if isinstance(command, str) else list(command)
        return ["/bin/sh", "-c", *map(str, parts)]
    if isinstance(command, str):
        command = shlex.split(command)
    if not isinstance(command, list) or not command:
        raise ValueError("command must be a non-empty list or string")
    return expand_args(command)
