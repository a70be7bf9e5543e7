"""Screen recording: `POST /start_recording` and `POST /end_recording` (an mp4 of the desktop).

ffmpeg's x11grab records the display with the pointer drawn, as OSWorld's server does, but
bounded: at most `MAX_SECONDS` and `MAX_BYTES` per recording (ffmpeg's own `-t` and `-fs`),
encoded with x264's fastest preset so a recording costs little CPU beside the rollout. The
file lives in the desktop's /tmp, where its processes can swap it, so what is sent is bounded
too: a regular file (not a link, not sparse) of at most `MAX_BYTES` and ffmpeg's overshoot. One
recording per server at a time; a second start answers 400 as OSWorld's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from environments.limits import RECORDING_BYTES, REPLY_SLACK
from environments.server.sending import FileRefused, open_bounded, send_bounded
from environments.server.state import STATE

__all__ = ["MAX_BYTES", "MAX_SECONDS", "Recorder", "install"]

MAX_SECONDS = 30 * 60
MAX_BYTES = RECORDING_BYTES
FRAME_RATE = 15
#: How long ffmpeg may take to write the mp4's header, which is when it counts as recording.
#: (OSWorld waits a fixed 2 s; on a loaded host ffmpeg can take longer than that to start, and a
#: recording stopped before its header exists leaves no file at all.)
_START_TIMEOUT_S = 20.0  # under the client's 30 s for the request
_START_POLL_S = 0.05
#: How long ffmpeg may take to finish the file after SIGINT (OSWorld's bound).
_FINISH_S = 15.0


@dataclass
class Recorder:
    """The one ffmpeg process of this server, if any, and the folder it writes into."""

    process: subprocess.Popen[bytes] | None = None
    folder: Path | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def output(self) -> Path:
        assert self.folder is not None
        return self.folder / "recording.mp4"

    def spawn(self, argv: list[str], env: dict[str, str]) -> None:
        """Start ffmpeg in its own session, its messages in the folder's log."""
        assert self.folder is not None
        with (self.folder / "ffmpeg.log").open("wb") as log:
            self.process = subprocess.Popen(
                argv, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )

    def discard(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder = None

    def log_tail(self) -> str:
        if self.folder is None:
            return ""
        with contextlib.suppress(OSError):
            lines = (self.folder / "ffmpeg.log").read_text(errors="replace").strip().splitlines()
            return lines[-1] if lines else ""
        return ""


RECORDER = web.AppKey("recorder", Recorder)
routes = web.RouteTableDef()


def _json(status: str, message: str, code: int) -> web.Response:
    return web.json_response({"status": status, "message": message}, status=code)


def _ffmpeg_argv(display: str, width: int, height: int, output: Path) -> list[str]:
    return [
        "ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
        "-f", "x11grab", "-draw_mouse", "1", "-framerate", str(FRAME_RATE),
        "-video_size", f"{width}x{height}", "-i", display,
        "-t", str(MAX_SECONDS), "-fs", str(MAX_BYTES),
        "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2",
        "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
        "-movflags", "+faststart", str(output),
    ]  # fmt: skip


@routes.post("/start_recording")
async def start_recording(request: web.Request) -> web.Response:
    state = request.app[STATE]
    recorder = request.app[RECORDER]
    async with recorder.lock:
        if recorder.process is not None and recorder.process.poll() is None:
            return _json("error", "Recording is already in progress.", 400)
        recorder.discard()
        if shutil.which("ffmpeg", path=state.env.get("PATH")) is None:
            return _json("error", "ffmpeg is not installed; install the ffmpeg package", 500)
        width, height = await state.capture.size()
        recorder.folder = Path(tempfile.mkdtemp(prefix="agent_s3_recording_"))
        argv = _ffmpeg_argv(state.env.get("DISPLAY", ":0"), width, height, recorder.output)
        recorder.spawn(argv, state.env)
        assert recorder.process is not None
        state.registry.add(recorder.process.pid)
        failure = await _until_recording(recorder)
        if failure:
            recorder.discard()
            return _json("error", f"Failed to start recording: {failure}", 500)
    return _json("success", "Started recording.", 200)


async def _until_recording(recorder: Recorder) -> str:
    """Wait until ffmpeg has written the mp4's header; the reason it has not, or ''."""
    process = recorder.process
    assert process is not None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _START_TIMEOUT_S
    while process.poll() is None:
        with contextlib.suppress(OSError):
            if recorder.output.lstat().st_size > 0:
                return ""
        if loop.time() > deadline:
            return f"ffmpeg wrote nothing within {_START_TIMEOUT_S:g} s"
        await asyncio.sleep(_START_POLL_S)
    return f"ffmpeg exited ({recorder.log_tail() or f'exit status {process.returncode}'})"


@routes.post("/end_recording")
async def end_recording(request: web.Request) -> web.StreamResponse:
    """Stop ffmpeg (SIGINT lets it finish the mp4) and answer with the file as an attachment."""
    recorder = request.app[RECORDER]
    async with recorder.lock:
        process = recorder.process
        if process is None:
            return _json("error", "No recording in progress to stop.", 400)
        try:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    await asyncio.to_thread(process.wait, _FINISH_S)
                except subprocess.TimeoutExpired:
                    return _json("error", f"ffmpeg did not finish within {_FINISH_S:g} s and was killed", 500)
            try:  # the desktop's processes may have swapped the file meanwhile: see `sending`
                fd, size = await asyncio.to_thread(
                    open_bounded, str(recorder.output), MAX_BYTES + REPLY_SLACK, "the recording", follow=False
                )
            except FileRefused as exc:
                return _json("error", f"Recording failed: {exc}", 404 if exc.status == 404 else 413)
            if size == 0:
                os.close(fd)
                reason = recorder.log_tail() or f"exit status {process.returncode}"
                return _json("error", f"Recording failed: no video was written ({reason})", 500)
            # Sent from the descriptor opened above; the folder may go now.
            return await send_bounded(request, fd, size, content_type="video/mp4", filename="recording.mp4")
        finally:
            recorder.discard()


def install(app: web.Application) -> None:
    """Add the recording routes and their state to the app; a live recording ends with it."""
    app[RECORDER] = Recorder()
    app.add_routes(routes)

    async def _stop(app: web.Application) -> None:
        app[RECORDER].discard()

    app.on_cleanup.append(_stop)
