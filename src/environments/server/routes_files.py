"""Files: /file (download: bounded, never sparse, see `sending`), /setup/upload (streamed,
size-limited), /list_directory."""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from typing import Any

from aiohttp import BodyPartReader, web

from environments.limits import FILE_BYTES
from environments.server.bodies import expand_path, json_body
from environments.server.sending import FileRefused, open_bounded, send_bounded
from environments.server.state import STATE, ServerState

__all__ = ["routes"]

routes = web.RouteTableDef()
_MAX_TREE_DEPTH = 64


def _error(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)


@routes.post("/file")
async def get_file(request: web.Request) -> web.StreamResponse:
    form = await request.post()
    raw = form.get("file_path")
    if not isinstance(raw, str) or not raw:
        return _error("file_path is required", 400)
    path = expand_path(raw)
    try:
        fd, size = await asyncio.to_thread(open_bounded, path, FILE_BYTES, f"the desktop's file {raw}")
    except FileRefused as exc:
        return _error(str(exc), exc.status)
    name = os.path.basename(path).replace('"', "").replace("\\", "")
    return await send_bounded(request, fd, size, content_type="application/octet-stream", filename=name)


def _grant(state: ServerState, path: str) -> None:
    """Uploaded files belong to the desktop user, so its applications may edit them."""
    if state.config.run_as is not None:
        os.chown(path, state.config.run_as.uid, state.config.run_as.gid)


def _make_parents(state: ServerState, folder: str) -> None:
    """`mkdir -p`, each folder it creates granted to the desktop user."""
    missing = []
    current = os.path.abspath(folder)
    while not os.path.isdir(current):
        missing.append(current)
        current = os.path.dirname(current)
    for path in reversed(missing):
        os.mkdir(path)
        _grant(state, path)


@routes.post("/setup/upload")
async def upload(request: web.Request) -> web.Response:
    """Multipart `file_path` then `file_data`; written to a temporary name, then renamed."""
    state = request.app[STATE]
    limit = state.config.max_body_bytes
    reader = await request.multipart()
    file_path: str | None = None
    written: int | None = None
    while (part := await reader.next()) is not None:
        if not isinstance(part, BodyPartReader):
            continue
        if part.name == "file_path":
            file_path = expand_path((await part.read(decode=True)).decode("utf-8"))
        elif part.name == "file_data":
            if file_path is None:
                return _error("file_path must come before file_data", 400)
            try:
                written = await _save(state, part, file_path, limit)
            except web.HTTPRequestEntityTooLarge:
                raise
            except OSError as exc:
                return _error(f"Failed to upload file: {exc}", 500)
    if file_path is None or written is None:
        return _error("file_path and file_data are required", 400)
    return web.Response(text=f"File Uploaded: {written} bytes")


async def _save(state: ServerState, part: BodyPartReader, file_path: str, limit: int) -> int:
    target_dir = os.path.dirname(file_path) or "."
    _make_parents(state, target_dir)
    fd, temp = tempfile.mkstemp(prefix=".upload-", dir=target_dir)
    size = 0
    try:
        with os.fdopen(fd, "wb") as sink:
            while chunk := await part.read_chunk(256 * 1024):
                size += len(chunk)
                if size > limit:
                    raise web.HTTPRequestEntityTooLarge(max_size=limit, actual_size=size)
                sink.write(chunk)
        os.chmod(temp, 0o644)
        _grant(state, temp)
        os.replace(temp, file_path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return size


def _tree(directory: str, depth: int = 0) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "directory", "name": os.path.basename(directory), "children": []}
    try:
        entries = sorted(os.listdir(directory))
    except OSError as exc:
        return {"error": str(exc)}
    for entry in entries:
        full = os.path.join(directory, entry)
        if os.path.isdir(full) and not os.path.islink(full) and depth < _MAX_TREE_DEPTH:
            node["children"].append(_tree(full, depth + 1))
        else:
            node["children"].append({"type": "file", "name": entry})
    return node


@routes.post("/list_directory")
async def list_directory(request: web.Request) -> web.Response:
    data = await json_body(request)
    if "path" not in data:
        return _error("Missing 'path' parameter", 400)
    path = expand_path(str(data["path"]))
    if not await asyncio.to_thread(os.path.isdir, path):
        return _error("The provided path is not a directory", 400)
    tree = await asyncio.to_thread(_tree, path)
    return web.json_response({"directory_tree": tree})
