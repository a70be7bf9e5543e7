"""Desktops are started only as many as the machine has room for; the rest of the rollouts queue."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from environments.capacity import CapacityError, MachineRoom, desktops_that_fit, machine_room
from environments.local.kind import LocalSettings, plan_desktops, plan_spares
from runner.environments import open_pool


def test_the_tighter_of_memory_and_cores_decides() -> None:
    assert desktops_that_fit(MachineRoom(memory_mib=24_000, cores=2), memory_mib=512, per_core=4) == 8
    assert desktops_that_fit(MachineRoom(memory_mib=1_500, cores=16), memory_mib=512, per_core=4) == 2
    assert desktops_that_fit(MachineRoom(memory_mib=300, cores=16), memory_mib=512, per_core=4) == 0


def test_a_thousand_rollouts_get_what_fits(caplog: pytest.LogCaptureFixture) -> None:
    room = MachineRoom(memory_mib=24_000, cores=2)
    with caplog.at_level(logging.WARNING):
        assert plan_desktops(1000, LocalSettings(), room) == 8
    assert "1000 desktops asked for, 8 fit" in caplog.text
    assert plan_desktops(3, LocalSettings(), room) == 3


def test_no_room_is_one_line_saying_what_to_change() -> None:
    with pytest.raises(CapacityError) as caught:
        plan_desktops(4, LocalSettings(), MachineRoom(memory_mib=200, cores=8))
    message = str(caught.value)
    assert "\n" not in message and "200 MiB" in message and "environment.desktop_memory_mib" in message


def test_the_room_is_read_from_this_machine(tmp_path: Path) -> None:
    room = machine_room()
    assert room.memory_mib > 0 and room.cores == len(os.sched_getaffinity(0))
    odd = tmp_path / "meminfo"
    odd.write_text("MemTotal: 1000 kB\n")
    with pytest.raises(CapacityError, match="no MemAvailable"):
        machine_room(odd)


@pytest.mark.desktop
@pytest.mark.integration
async def test_a_pool_asked_for_1000_desktops_starts_what_fits_and_queues(tmp_path: Path) -> None:
    """One desktop fits (one per machine's cores): 1000 asked for start one, and a second
    loan waits until the first is given back."""
    cfg = LocalSettings(width=800, height=600, sandbox=False, base_dir=tmp_path / "envs",
                            desktops_per_core=1 / len(os.sched_getaffinity(0)))
    async with open_pool(cfg, size=1000) as pool:
        first = await pool.acquire()
        second = asyncio.ensure_future(pool.acquire())
        await asyncio.sleep(0.5)
        assert not second.done()  # queued: no second desktop was started
        pool.release(first)
        assert await asyncio.wait_for(second, 30) is first
        pool.release(first)


def test_spares_are_on_only_where_they_fit(caplog: pytest.LogCaptureFixture) -> None:
    roomy, tight = MachineRoom(memory_mib=24_000, cores=2), MachineRoom(memory_mib=6_000, cores=2)
    assert plan_spares(8, LocalSettings(), roomy) is True
    with caplog.at_level(logging.WARNING):
        assert plan_spares(8, LocalSettings(), tight) is False
    notes = [r.getMessage() for r in caplog.records if "spare" in r.getMessage()]
    assert len(notes) == 1 and "\n" not in notes[0] and "environment.spare: true" in notes[0]
    assert plan_spares(8, LocalSettings(spare=False), roomy) is False


def test_spares_asked_for_are_budgeted_like_desktops() -> None:
    tight = MachineRoom(memory_mib=6_000, cores=2)
    assert plan_desktops(8, LocalSettings(), tight) == 8
    assert plan_desktops(8, LocalSettings(spare=True), tight) == 5  # 6000 // 1024
    assert plan_spares(5, LocalSettings(spare=True), tight) is True
