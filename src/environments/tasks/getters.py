"""Evaluator getters: turn a `result` / `expected` spec into a value a metric compares.

Files come back to the host (into the task's cache folder) and metrics read them there, as
OSWorld does; a missing result file yields ``None``, which every metric scores 0.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from environments.tasks.client import TaskClient, command_output
from environments.tasks.context import TaskContext, resolve_local
from environments.tasks.errors import TaskRunError, UnsupportedGetter
from environments.tasks.model import GetterSpec

__all__ = ["GETTER_TYPES", "get_state", "getter_supported"]

Getter = Callable[[TaskClient, dict[str, Any], TaskContext], Awaitable[Any]]


def _pick(values: list[Any], params: dict[str, Any]) -> Any:
    """OSWorld's `multi`/`gives`: return the entries at `gives` (one value if only one)."""
    gives = params.get("gives", [0])
    picked = [values[i] for i in gives]
    return picked[0] if len(picked) == 1 else picked


async def _vm_file(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> Any:
    multi = bool(params.get("multi", False))
    paths = params["path"] if multi else [params["path"]]
    dests = params["dest"] if multi else [params["dest"]]
    if len(paths) != len(dests):
        raise TaskRunError(f"task {ctx.task_id}: vm_file has {len(paths)} paths for {len(dests)} dests")
    local: list[str | None] = []
    for vm_path, dest in zip(paths, dests, strict=True):
        target = ctx.cache_path(str(dest))
        target.unlink(missing_ok=True)
        try:
            data = await client.file(str(vm_path))
        except FileNotFoundError:
            data = None
        if data is None:
            local.append(None)
            continue
        await asyncio.to_thread(target.write_bytes, data)
        local.append(str(target))
    return _pick(local, params) if multi else local[0]


async def _vm_command_line(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> str:
    reply = await client.execute(params["command"], shell=_shell(params))
    return command_output(reply).stdout


async def _vm_command_error(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> str:
    reply = await client.execute(params["command"], shell=_shell(params))
    return command_output(reply).stderr


def _shell(params: dict[str, Any]) -> bool:
    value = params.get("shell", False)
    return value.strip().lower() == "true" if isinstance(value, str) else bool(value)


async def _rule(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> Any:
    return params.get("rules")


async def _cache_file(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> str:
    return str(ctx.cache_path(str(params["path"])))


async def _cloud_file(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> Any:
    multi = bool(params.get("multi", False))
    urls = params["path"] if multi else [params["path"]]
    dests = params["dest"] if multi else [params["dest"]]
    local = [str(resolve_local(ctx, str(url), str(dest))) for url, dest in zip(urls, dests, strict=True)]
    return _pick(local, params) if multi else local[0]


async def _vm_screen_size(client: TaskClient, params: dict[str, Any], ctx: TaskContext) -> dict[str, int]:
    width, height = await client.screen_size()
    return {"width": int(width), "height": int(height)}


GETTER_TYPES: dict[str, Getter] = {
    "vm_file": _vm_file,
    "vm_command_line": _vm_command_line,
    "vm_command_error": _vm_command_error,
    "rule": _rule,
    "rules": _rule,
    "cache_file": _cache_file,
    "cloud_file": _cloud_file,
    "vm_screen_size": _vm_screen_size,
}


def getter_supported(getter_type: str) -> bool:
    return getter_type in GETTER_TYPES


async def get_state(client: TaskClient, spec: GetterSpec | None, ctx: TaskContext) -> Any:
    """The value `spec` describes, or ``None`` when there is no spec."""
    if spec is None:
        return None
    getter = GETTER_TYPES.get(spec.type)
    if getter is None:
        raise UnsupportedGetter(ctx.task_id, spec.type)
    try:
        return await getter(client, spec.params, ctx)
    except KeyError as exc:
        raise TaskRunError(f"task {ctx.task_id}: getter {spec.type!r} lacks field {exc}") from None
