"""`AndroidProvider`: choosing devices, the start snapshot, lending, and physical devices."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from core.protocols import EnvError
from environments.android import AndroidProvider, console_port_of
from testing.android import FakeFleet, SimulatedDevice

pytestmark = pytest.mark.integration


def test_console_ports_come_from_emulator_serials() -> None:
    assert console_port_of("emulator-5554") == 5554
    assert console_port_of("emulator-5556") == 5556
    assert console_port_of("R58M123ABC") is None
    assert console_port_of("127.0.0.1:5555") is None


async def test_pool_lends_each_emulator_once_and_waits_when_all_are_out(
    android_pool: AndroidProvider, fleet: FakeFleet
) -> None:
    envs = [await android_pool.acquire() for _ in range(3)]
    assert sorted(e.serial for e in envs) == sorted(fleet.serials)
    assert all(e.platform == "android" and e.sandbox() is None for e in envs)
    waiting = asyncio.create_task(android_pool.acquire())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    android_pool.release(envs[1])
    assert await asyncio.wait_for(waiting, 2) is envs[1]
    # Starting the pool loaded each emulator's start snapshot through its console.
    assert all("avd snapshot load agent_s3_start" in c.commands for c in fleet.consoles)


async def test_save_snapshot_records_the_current_state_as_the_start(fleet: FakeFleet) -> None:
    fleet.devices[0].state.settings["global"]["wifi_on"] = "0"
    async with AndroidProvider(
        1,
        serials=[fleet.serials[0]],
        adb_port=fleet.server.port,
        token_path=fleet.token_path,
        snapshot="custom",
        save_snapshot=True,
        settle=0,
    ) as pool:
        env = await pool.acquire()
        fleet.devices[0].state.settings["global"]["wifi_on"] = "1"
        await env.revert()
    assert fleet.devices[0].state.settings["global"]["wifi_on"] == "0"


async def test_too_few_devices_or_a_missing_serial_is_one_clear_line(fleet: FakeFleet) -> None:
    with pytest.raises(EnvError, match=r"4 Android devices wanted but adb at .* has 3 online; start more"):
        await AndroidProvider(4, adb_port=fleet.server.port, token_path=fleet.token_path).start()
    with pytest.raises(EnvError, match="no online device emulator-2"):
        await AndroidProvider(1, serials=["emulator-2"], adb_port=fleet.server.port).start()
    with pytest.raises(EnvError, match="pass size >= 1"):
        AndroidProvider(0)


async def test_nothing_listening_is_one_clear_line(fleet: FakeFleet, unused_tcp_port: int) -> None:
    with pytest.raises(EnvError, match=r"no adb server at 127\.0\.0\.1"):
        await AndroidProvider(1, adb_port=unused_tcp_port).start()


async def test_a_physical_device_joins_the_pool_but_cannot_revert(fleet: FakeFleet, tmp_path: Path) -> None:
    fleet.server.add(SimulatedDevice("R58M123ABC", (540, 960)))
    async with AndroidProvider(1, serials=["R58M123ABC"], adb_port=fleet.server.port, settle=0) as pool:
        env = await pool.acquire()
        assert env.console is None
        assert await env.screen_size() == (540, 960)
        with pytest.raises(EnvError, match="physical device: emulator snapshots are not available"):
            await env.revert()
