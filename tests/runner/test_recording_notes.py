"""``rollout.record`` on environments that cannot record, or whose recording fails: the
rollout goes on and ``recording-error.txt`` says why, which report.html shows; an earlier
attempt's recording is not left behind as if it were this one's."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.protocols import EnvError, Environment, ExecResult, Sandbox
from core.trajectory import RolloutInfo, RunLayout, Task
from runner.recording import RECORDING_ERROR_FILE, RECORDING_FILE, recorded
from runner.report import collect_run, render_report


class _Screenless(Environment):
    """An environment that only reverts: it has no way to record (the interface's default)."""

    name = "plain-1"
    platform = "ubuntu"

    async def screenshot(self) -> bytes:
        raise EnvError("no screen")

    async def screen_size(self) -> tuple[int, int]:
        return (10, 10)

    async def cursor_position(self) -> tuple[int, int]:
        return (0, 0)

    async def act(self, code: str) -> ExecResult:
        raise EnvError("no actions")

    def sandbox(self) -> Sandbox | None:
        return None

    async def revert(self) -> None:
        return None

    async def close(self) -> None:
        return None


class _Broken(_Screenless):
    """Starts recording but loses the file (as a server whose ffmpeg died would answer)."""

    async def start_recording(self) -> bool:
        return True

    async def end_recording(self) -> bytes:
        raise EnvError("/end_recording answered 500: Recording failed: no video was written")


def test_an_environment_that_cannot_record_says_so(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r", durable=False)
    layout.task("t").write_task(Task(id="t", instruction="x"))
    rd = layout.task("t").rollout(0)
    rd.start(RolloutInfo(run_id="r", task_id="t", rollout=0, model="m/x", started_at=1.0))
    (rd.path / RECORDING_FILE).write_bytes(b"an earlier attempt's video")

    async def go() -> None:
        async with recorded(_Screenless(), rd.path, enabled=True):
            pass

    asyncio.run(go())
    assert not (rd.path / RECORDING_FILE).exists()
    assert (rd.path / RECORDING_ERROR_FILE).read_text() == "environment plain-1 cannot record its screen\n"
    html = render_report(collect_run(layout))
    assert "<b>no recording</b>: environment plain-1 cannot record its screen" in html and "<video" not in html


def test_a_failed_recording_is_named_and_the_block_still_runs(tmp_path: Path) -> None:
    ran = []

    async def go() -> None:
        async with recorded(_Broken(), tmp_path / "rollout-0", enabled=True):
            ran.append(True)

    asyncio.run(go())
    assert ran == [True]
    note = (tmp_path / "rollout-0" / RECORDING_ERROR_FILE).read_text()
    assert note.startswith("the recording could not be saved: /end_recording answered 500")


def test_without_the_setting_nothing_is_asked(tmp_path: Path) -> None:
    async def go() -> None:
        async with recorded(_Broken(), tmp_path, enabled=False):
            pass

    asyncio.run(go())
    assert list(tmp_path.iterdir()) == []
