"""A rollout's screen recording: ``recording.mp4`` in its folder, when asked for and possible.

With ``rollout.record`` the runner asks the environment to record (a desktop's controller
server runs ffmpeg, bounded in time and size) from the end of the task's setup to the end of
its scoring, as OSWorld's harness does, and saves the mp4 beside the rollout's steps. An
environment that cannot record, or a recording that fails, leaves ``recording-error.txt``
saying why (and a warning in the log): the rollout itself goes on either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from core.atomic import write_bytes_atomic, write_text_atomic
from core.protocols import EnvError, Environment

__all__ = ["RECORDING_ERROR_FILE", "RECORDING_FILE", "recorded"]

_log = logging.getLogger(__name__)

RECORDING_FILE = "recording.mp4"
RECORDING_ERROR_FILE = "recording-error.txt"
#: How long stopping may take: the server gives ffmpeg 15 s to finish the file, then sends it.
_END_TIMEOUT_S = 90.0


def _note(folder: Path, why: str) -> None:
    _log.warning("no recording in %s: %s", folder, why)
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / RECORDING_ERROR_FILE, why + "\n")


def _save(folder: Path, video: bytes) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(folder / RECORDING_FILE, video)


def _clear(folder: Path) -> None:
    """Drop a previous attempt's recording or note."""
    for old in (RECORDING_FILE, RECORDING_ERROR_FILE):
        (folder / old).unlink(missing_ok=True)


@asynccontextmanager
async def recorded(env: Environment, folder: Path, *, enabled: bool) -> AsyncIterator[None]:
    """Record `env`'s screen while the block runs and save it in `folder` (if `enabled`)."""
    if not enabled:
        yield
        return
    await asyncio.to_thread(_clear, folder)
    started = False
    try:
        started = await env.start_recording()
        if not started:
            await asyncio.to_thread(_note, folder, f"environment {env.name} cannot record its screen")
    except EnvError as exc:
        await asyncio.to_thread(_note, folder, f"the recording did not start: {exc}")
    try:
        yield
    finally:
        if started:
            try:
                video = await asyncio.wait_for(env.end_recording(), _END_TIMEOUT_S)
            except (EnvError, TimeoutError) as exc:
                await asyncio.to_thread(_note, folder, f"the recording could not be saved: {exc or 'timed out'}")
            else:
                await asyncio.to_thread(_save, folder, video)
