"""The runner's own rollout loop drives an Android environment unchanged: steps, op-list
code and screenshots land on disk, and the adb-shell check scores the result."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent_s3.compile_android import android_worker
from agent_s3.config import GroundingConfig, WorkerConfig
from agent_s3.grounding import Grounder
from core.llm import ChatModel, Reply, Script, ScriptRequest
from core.trajectory import RolloutDir, RolloutInfo
from environments.android import AdbTaskClient, AndroidEnvironment
from environments.tasks import TaskContext, evaluate, run_setup
from environments.tasks.android_suite import android_task, load_android_suite
from runner.config import RolloutConfig
from runner.rollout import Rollout
from testing.android import FakeFleet

pytestmark = pytest.mark.integration


def act(code: str) -> Reply:
    return Reply(text=f"On the phone.\n```python\n{code}\n```")


async def test_runner_rollout_completes_an_android_task(
    android_env: AndroidEnvironment, tmp_path: Path
) -> None:
    task = next(t for t in load_android_suite() if t.id == "settings-airplane-on")
    record = android_task(task)
    await android_env.revert_to(record.snapshot)
    client = AdbTaskClient(android_env)
    ctx = TaskContext(task=task, cache_dir=tmp_path / "cache")
    await run_setup(client, ctx)
    Script(
        "pol",
        [act('agent.open("Settings")'), act('agent.click("the Airplane mode switch")'), act("agent.done()")],
    )
    Script("gnd", [Reply(text="(480, 177)")])
    worker = android_worker(
        ChatModel.from_name("scripted/pol"),
        WorkerConfig(reflection=False),
        Grounder(ChatModel.from_name("scripted/gnd"), GroundingConfig(space="pixels"), platform="android"),
    )
    rollout_dir = RolloutDir(tmp_path / "run" / task.id / "rollout-0", task.id, 0)
    info = RolloutInfo(
        run_id="r",
        task_id=task.id,
        rollout=0,
        model="scripted/pol",
        started_at=time.time(),
        environment=android_env.name,
    )
    result = await Rollout(
        env=android_env,
        worker=worker,
        instruction=record.instruction,
        rollout_dir=rollout_dir,
        info=info,
        config=RolloutConfig(settle_seconds=0),
        max_steps=record.max_steps,
    ).run()
    assert (result.status, result.steps) == ("done", 3)
    steps = list(rollout_dir.iter_steps())
    assert json.loads(steps[0].code or "") == [{"op": "open", "app": "Settings"}]
    assert json.loads(steps[1].code or "") == [{"op": "tap", "x": 480, "y": 177}]
    assert rollout_dir.read_screenshot(steps[1], "after") != rollout_dir.read_screenshot(steps[1], "before")
    assert await evaluate(client, ctx) == 1.0


async def test_an_emulator_that_dies_mid_rollout_ends_it_as_environment_lost(
    android_env: AndroidEnvironment, fleet: FakeFleet, tmp_path: Path
) -> None:
    def open_then_die(request: ScriptRequest) -> str:
        fleet.devices[0].online = False
        return 'The emulator is up.\n```python\nagent.open("Settings")\n```'

    Script("pol", [open_then_die])
    worker = android_worker(ChatModel.from_name("scripted/pol"), WorkerConfig(reflection=False))
    rollout_dir = RolloutDir(tmp_path / "run" / "t" / "rollout-0", "t", 0)
    info = RolloutInfo(run_id="r", task_id="t", rollout=0, model="scripted/pol", started_at=time.time())
    result = await Rollout(
        env=android_env,
        worker=worker,
        instruction="Open Settings",
        rollout_dir=rollout_dir,
        info=info,
        config=RolloutConfig(settle_seconds=0),
    ).run()
    assert result.status == "environment_lost" and "offline" in (result.reason or "")
    assert rollout_dir.step_count() == 1
