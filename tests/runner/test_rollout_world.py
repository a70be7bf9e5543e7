"""Rollouts meeting the world: a desktop that dies mid-rollout, and a server that says it is
Windows (the project's server started with the Windows platform settings)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import desktops_missing, start_desktop

from core.llm import ScriptRequest
from environments.local import LocalDesktop, LocalEnvironment
from environments.local.server_env import server_environment
from environments.local.spawner import run_all
from environments.osworld.kind import OSWorldSettings
from runner.demo_policy import PlannedReplies, action_reply, role_of
from runner.environments import open_pool
from runner.tasks import resolve_task

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


@pytest.fixture
def doomed_desktop(tmp_path: Path) -> Iterator[LocalDesktop]:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    desktop = start_desktop(tmp_path / "envs", "runner-doomed", "tests-runner-doomed")
    yield desktop
    run_all([desktop.close])


async def test_a_dead_display_ends_the_rollout_as_environment_lost_with_steps_kept(
    harness, doomed_desktop: LocalDesktop
) -> None:
    async def keep(_: LocalEnvironment) -> None:
        return None

    env = LocalEnvironment(doomed_desktop, server_environment(doomed_desktop), on_close=keep)
    plan = PlannedReplies(plan=[action_reply("First key.", "agent.hotkey(['ctrl', 'end'])")] * 3)

    def responder(request: ScriptRequest) -> str:
        reply = plan(request)
        if role_of(request.messages) == "policy" and "Step 2." in request.messages[-1].text():
            os.kill(doomed_desktop.info().pid, signal.SIGKILL)  # the X server dies under the rollout
        return reply

    try:
        ran = await harness.run(resolve_task("Press a key twice."), env, responder)
    finally:
        await env.close()

    assert ran.outcome.result.status == "environment_lost"
    assert "X server" in ran.outcome.result.reason
    assert ran.outcome.score is None
    traj = ran.trajectory
    assert traj.info.status == "environment_lost" and traj.info.step_count == 2
    first, second = traj.steps
    assert first.error is None and first.after_screenshot is not None
    assert second.action == {"kind": "hotkey", "keys": ["ctrl", "end"]} and second.after_screenshot is None
    assert second.error and "EnvironmentLost" in second.error and second.before_screenshot


def _xvfb() -> tuple[subprocess.Popen[bytes], str]:
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1280x720x24", "-nolisten", "tcp"],
        pass_fds=[write_fd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        number = pipe.readline().strip().decode()
    return proc, f":{number}"


@pytest.fixture
def windows_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The project's controller server on a bare Xvfb display, told it is Windows."""
    if desktops_missing() is not None:
        pytest.skip(desktops_missing() or "")
    xvfb, display = _xvfb()
    token = secrets.token_urlsafe(16)
    (tmp_path / "token").write_text(token)
    port_file = tmp_path / "port"
    server = subprocess.Popen(
        [sys.executable, "-m", "environments.server", "--port", "0", "--port-file", str(port_file),
         "--token-file", str(tmp_path / "token"), "--platform", "windows"],
        env={**os.environ, "DISPLAY": display}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port_file.read_text().strip()}", token
    finally:
        for proc in (server, xvfb):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def test_a_windows_server_gets_windows_prompts_and_actions(harness, windows_server) -> None:
    url, token = windows_server
    plan = PlannedReplies(
        plan=[
            action_reply("I scroll down the page.", "agent.scroll('the middle of the page', -3)"),
            action_reply("I copy the selection.", "agent.hotkey(['ctrl', 'c'])"),
            action_reply("Done.", "agent.done()"),
        ]
    )
    cfg = OSWorldSettings(url=url, token=token)
    async with open_pool(cfg) as pool:
        env = await pool.acquire()
        assert env.platform == "windows"
        ran = await harness.run(resolve_task("Scroll down, then copy."), env, plan)

    assert ran.outcome.result.status == "done"
    steps = ran.trajectory.steps
    assert steps[0].code and "pyautogui.scroll(-360)" in steps[0].code, "Windows wheel units (120 a notch)"
    assert steps[0].error is None and steps[1].error is None, "the compiled actions ran on the display"
    assert ran.trajectory.info.environment == "osworld"
    systems = ran.system_prompts()
    worker_system = next(s for s in systems if s.startswith("You operate a computer"))
    assert "running Windows" in worker_system and "PowerShell" in worker_system
    assert "Ubuntu" not in worker_system
