"""Android tasks end to end: setup and scoring through adb-shell checks, and rollouts of the
agent_s3 worker (scripted replies) on simulated emulators through the real adb client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_s3.compile_android import android_worker
from agent_s3.config import GroundingConfig, WorkerConfig
from agent_s3.grounding import Grounder
from core.llm import ChatModel, ImagePart, Reply, Script
from core.trajectory import Task
from environments.android import AdbTaskClient, AndroidEnvironment, AndroidProvider
from environments.tasks import TaskContext, evaluate, run_setup
from environments.tasks.android_suite import android_task, load_android_suite, step_budget
from testing.android import NOTES, FakeFleet

pytestmark = pytest.mark.integration


def act(code: str, thought: str = "Looking at the phone.") -> Reply:
    return Reply(text=f"{thought}\n```python\n{code}\n```")


def task(task_id: str) -> Task:
    return next(t for t in load_android_suite() if t.id == task_id)


def test_suite_loads_with_androidworld_budgets() -> None:
    budgets = {t.id: step_budget(t) for t in load_android_suite()}
    assert budgets == {
        "notes-save-shopping-item": 12,
        "settings-airplane-on": 10,
        "settings-wifi-off-and-note": 24,
        "infeasible-klingon-language": 10,
    }
    record = android_task(task("settings-airplane-on"))
    assert (record.platform, record.max_steps, record.snapshot) == ("android", 10, "agent_s3_start")


async def test_checks_score_the_device_state(
    android_env: AndroidEnvironment, fleet: FakeFleet, tmp_path: Path
) -> None:
    client = AdbTaskClient(android_env)
    device = fleet.devices[0]
    t = task("settings-wifi-off-and-note")
    ctx = TaskContext(task=t, cache_dir=tmp_path)
    await run_setup(client, ctx)
    assert await evaluate(client, ctx) == 0.0
    device.state.settings["global"]["wifi_on"] = "0"
    assert await evaluate(client, ctx) == 0.0
    device.start(NOTES)
    device.tap(270, 170)
    device.text("wifi is off")
    device.key("KEYCODE_ENTER")
    assert await evaluate(client, ctx) == 1.0
    assert await evaluate(client, ctx, last_action="FAIL") == 0.0
    infeasible = TaskContext(task=task("infeasible-klingon-language"), cache_dir=tmp_path)
    assert await evaluate(client, infeasible, last_action="FAIL") == 1.0
    await client.upload("/sdcard/x.txt", b"uploaded bytes\x00\xff")
    assert await client.file("/sdcard/x.txt") == b"uploaded bytes\x00\xff"
    assert await client.file("/sdcard/missing") is None


async def rollout(
    env: AndroidEnvironment, t: Task, name: str, replies: list[Reply], points: list[str], cache: Path
) -> tuple[float, int]:
    """Revert, set up, step the worker until done/fail or the budget, then score."""
    await env.revert_to(t.snapshot)
    client = AdbTaskClient(env)
    ctx = TaskContext(task=t, cache_dir=cache)
    await run_setup(client, ctx)
    Script(f"pol-{name}", replies)
    Script(f"gnd-{name}", [Reply(text=p) for p in points])
    worker = android_worker(
        ChatModel.from_name(f"scripted/pol-{name}"),
        WorkerConfig(reflection=False),
        Grounder(
            ChatModel.from_name(f"scripted/gnd-{name}"), GroundingConfig(space="pixels"), platform="android"
        ),
    )
    budget = step_budget(t) or 10
    last = None
    steps = 0
    while steps < budget:
        steps += 1
        screen = await env.screenshot()
        proposal = await worker.step(t.instruction, screen, await env.screen_size())
        last = proposal.action.kind
        if last in ("done", "fail"):
            break
        result = await env.act(proposal.code) if proposal.code else None
        worker.record(proposal, result)
    score = await evaluate(client, ctx, last_action="FAIL" if last == "fail" else None)
    return (score if last == "done" or last == "fail" else 0.0), steps


async def test_worker_completes_a_notes_task_through_adb(
    android_env: AndroidEnvironment, tmp_path: Path
) -> None:
    t = task("notes-save-shopping-item")
    replies = [
        act('agent.open("Notes")', "The home screen; the task needs the Notes app."),
        act('agent.type("the note text field at the top", "buy oat milk", enter=True)', "Notes is open."),
        act("agent.done()", "The list shows 'buy oat milk'."),
    ]
    score, steps = await rollout(android_env, t, "one", replies, ["(270, 170)"], tmp_path)
    assert (score, steps) == (1.0, 3)
    policy = Script.get("pol-one")
    policy.assert_done()
    Script.get("gnd-one").assert_done()
    screens = [
        p.data for r in policy.requests for m in r.messages for p in m.parts() if isinstance(p, ImagePart)
    ]
    assert len(set(screens)) >= 3  # home, Notes, Notes with the saved item: the screens really changed


async def test_three_rollouts_in_parallel_on_a_pool(
    android_pool: AndroidProvider, fleet: FakeFleet, tmp_path: Path
) -> None:
    t = task("settings-airplane-on")
    good = [
        act('agent.open("Settings")'),
        act('agent.click("the Airplane mode switch")'),
        act("agent.done()"),
    ]
    wrong = [act('agent.open("Settings")'), act('agent.click("the Wi-Fi switch")'), act("agent.done()")]
    silent = [act('agent.open("Settings")'), act('agent.click("the Airplane mode switch")')] + [
        act("agent.wait(0.01)") for _ in range(8)
    ]
    plans = [("a", good, ["(480, 177)"]), ("b", wrong, ["(480, 263)"]), ("c", silent, ["(480, 177)"])]

    async def one(name: str, replies: list[Reply], points: list[str]) -> tuple[float, int]:
        env = await android_pool.acquire()
        try:
            return await rollout(env, t, name, replies, points, tmp_path / name)
        finally:
            android_pool.release(env)

    results = await asyncio.gather(*(one(*plan) for plan in plans))
    # AndroidWorld's convention: a rollout that never says done scores 0 even in the right state.
    assert results == [(1.0, 3), (0.0, 3), (0.0, 10)]
    states = sorted(d.state.settings["global"]["airplane_mode_on"] for d in fleet.devices)
    assert states == ["0", "1", "1"]
    await android_pool.close()
