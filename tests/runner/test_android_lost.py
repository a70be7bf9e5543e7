"""A phone lost during a wide run: its rollout is retried on another phone of the pool, the
lost one leaves the pool, and a pool with no phone left says so in one line. Also the
settle time per environment kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_android_wide import NOTE_FIELD, NOTES_ICON, PhoneReplies

from core.llm import Ledger, Script
from core.protocols import EnvError
from core.trajectory import RunLayout
from environments.android.kind import AndroidSettings
from environments.android.pool import AndroidPool
from runner.config import load_run_config
from runner.demo_policy import action_reply
from runner.environments import open_pool
from runner.models import build_models
from runner.rollout import StepEvent
from runner.strategy import TaskRun
from runner.tasks import resolve_task
from runner.wide import WideScaling
from testing.android import FakeFleet, fake_fleet
from testing.llm import OpenAIServer

pytestmark = pytest.mark.integration

KEY = "sk-android-lost-key"


@pytest.fixture
def two_phones(tmp_path: Path) -> Iterator[FakeFleet]:
    with fake_fleet(2, tmp_path, screen=(540, 960)) as started:
        yield started


def _solver() -> PhoneReplies:
    return PhoneReplies(
        plan=[
            action_reply("Notes is on the home screen.", 'agent.click("the Notes app icon")'),
            action_reply("I write the note.",
                         "agent.type(element_description='the note text field', text='buy oat milk', enter=True)"),
            action_reply("Saved.", "agent.done()"),
        ],
        points={"the Notes app icon": NOTES_ICON, "the note text field": NOTE_FIELD},
    )  # fmt: skip


async def test_a_lost_phone_leaves_the_pool_and_its_rollout_is_retried(
    two_phones: FakeFleet, tmp_path: Path
) -> None:
    lost: list[str] = []

    async def unplug_once(event: StepEvent) -> None:
        if event.rollout != 1 or lost:
            return
        header = event.rollout_dir.read_info()
        assert header is not None and header.environment is not None
        device = next(d for d in two_phones.devices if header.environment.endswith(d.serial))
        device.online = False  # adb now lists it offline; its next command fails
        lost.append(header.environment)

    task = resolve_task("notes-save-shopping-item")
    async with OpenAIServer(Script("android-lost", [_solver()] * 100), api_key=KEY) as server:
        cfg = load_run_config([{
            "policy": {"model": "openai/solver", "base_url": server.base_url, "api_key": KEY},
            "environment": {"kind": "android", "adb_port": two_phones.server.port,
                            "console_token": str(two_phones.token_path)},
            "rollout": {"settle_seconds": 0.05},
            "strategy": "wide",
            "wide": {"rollouts": 2, "seed": 3, "judge": "none", "max_retries": 1},
        }])  # fmt: skip
        layout = RunLayout(tmp_path / "runs", "lost", durable=False)
        layout.path.mkdir(parents=True)
        ledger = Ledger(layout.ledger_path)
        models = build_models(cfg, ledger)
        strategy = WideScaling()
        try:
            async with open_pool(cfg.environment, size=2) as pool:
                assert isinstance(pool, AndroidPool)
                run = TaskRun(
                    task=task,
                    layout=layout,
                    config=cfg,
                    pool=pool,
                    models=models,
                    ledger=ledger,
                    hooks=[unplug_once],
                )
                result = await strategy(run)
                assert list(pool.lost) == lost and "offline" in pool.lost[lost[0]]
        finally:
            await strategy.aclose()
            await models.aclose()
    headers = layout.task(task.id).headers()
    assert headers[1].attempts == 2 and headers[1].status == "done"
    assert headers[1].environment == headers[0].environment != lost[0]
    assert result.scores == {0: 1.0, 1: 1.0}


async def test_a_pool_with_no_phone_online_says_so(two_phones: FakeFleet) -> None:
    cfg = AndroidSettings(adb_port=two_phones.server.port, console_token=two_phones.token_path)
    async with open_pool(cfg, size=2) as pool:
        first, second = await pool.acquire(), await pool.acquire()
        for device in two_phones.devices:
            device.online = False
        pool.release(first)
        pool.release(second)
        with pytest.raises(EnvError, match="no Android device of the pool is online any more") as caught:
            await pool.acquire()
    assert "\n" not in str(caught.value) and "adb reports it offline" in str(caught.value)


def test_phones_settle_faster_unless_told() -> None:
    assert load_run_config([{"environment": {"kind": "android"}}]).rollout.settle_seconds == 1.0
    assert load_run_config([{"environment": {"kind": "local"}}]).rollout.settle_seconds == 3.0
    told = load_run_config([{"environment": {"kind": "android"}}, "rollout.settle_seconds=0.2"])
    assert told.rollout.settle_seconds == 0.2
    tuned = load_run_config(
        [{"environment": {"kind": "android"}, "rollout": {"settle_by_kind": {"android": 0.4}}}]
    )
    assert tuned.rollout.settle_seconds == 0.4
