"""The local suite on a real desktop: each task scores 0 after setup and 1 after its solution.

One desktop serves every task (reverted before each), and the solution's keys and clicks go
through the desktop's server as pyautogui actions, exactly as an agent's would.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from tasks_suite_solutions import SOLUTIONS, Chords, Click, Goto, Key, Pause, Step, Type, Until

from core.protocols import Environment
from core.trajectory import Task
from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment
from environments.local.server_env import desktop_client, server_environment
from environments.osworld import OSWorldClient
from environments.tasks import TaskContext, evaluate, load_suite, run_setup

_NEEDS = ("Xvfb", "openbox", "mousepad", "xterm", "pcmanfm", "soffice", "xdotool", "dbus-daemon")
SUITE = load_suite()


def _params() -> list[object]:
    params = []
    for task in SUITE:
        marks = [pytest.mark.desktop]
        if task.domain.startswith("libreoffice"):
            marks.append(pytest.mark.slow)
        params.append(pytest.param(task, id=task.id, marks=marks))
    return params


@pytest.fixture(scope="module")
def suite_desktop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDesktop]:
    """One blank desktop for the whole module; each test reverts it first."""
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"missing {', '.join(missing)} (install the desktop Debian packages)")
    desktop = LocalDesktop("tasks-suite", tmp_path_factory.mktemp("suite-envs"), DesktopConfig(), pool="tests-tasks")
    try:
        desktop.start()
        yield desktop
    finally:
        desktop.close()


@pytest.fixture
async def suite_env(suite_desktop: LocalDesktop) -> AsyncIterator[tuple[Environment, OSWorldClient]]:
    async def keep_desktop(_: LocalEnvironment) -> None:
        return None

    env = LocalEnvironment(suite_desktop, server_environment(suite_desktop), on_close=keep_desktop)
    await env.revert()
    info = suite_desktop.info()
    client = desktop_client(info)
    try:
        yield env, client
    finally:
        await client.aclose()
        await env.close()


async def _until(client: OSWorldClient, env: Environment, step: Until) -> None:
    loop = asyncio.get_running_loop()
    start = loop.time()
    retried = step.retry_key is None
    while True:
        result = await client.execute(step.shell, shell=True)
        if result.returncode == 0:
            return
        elapsed = loop.time() - start
        if not retried and elapsed > step.timeout / 2:
            retried = True
            assert (await env.act(Key(step.retry_key).pyautogui())).ok
        if elapsed > step.timeout:
            raise AssertionError(f"condition not met within {step.timeout} s: {step.shell}")
        await asyncio.sleep(0.2)


async def perform(env: Environment, client: OSWorldClient, steps: list[Step]) -> None:
    """Run a scripted solution: actions through the server's action endpoint, waits through /execute."""
    for step in steps:
        if isinstance(step, Pause):
            await asyncio.sleep(step.seconds)
        elif isinstance(step, Until):
            await _until(client, env, step)
        elif isinstance(step, Key | Goto | Chords | Type | Click):
            result = await env.act(step.pyautogui())
            assert result.ok, (step, result)


@pytest.mark.parametrize("task", _params())
async def test_suite_task_scores_zero_then_one(
    task: Task, suite_env: tuple[Environment, OSWorldClient], tmp_path: Path
) -> None:
    env, client = suite_env
    ctx = TaskContext(task=task, cache_dir=tmp_path / "cache" / task.id)
    shot = tmp_path / "screen.png"
    try:
        await run_setup(client, ctx)
        assert await evaluate(client, ctx) == 0.0, "the fresh state already passes"
        await perform(env, client, SOLUTIONS[task.id])
        assert await evaluate(client, ctx) == 1.0, "the scripted solution did not pass"
    except AssertionError as exc:
        shot.write_bytes(await env.screenshot())
        raise AssertionError(f"{exc} (screen: {shot}, fetched files: {ctx.cache_dir})") from exc
