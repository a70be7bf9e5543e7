"""How many local desktops this machine can run at once, decided before any starts.

A run asks for as many desktops as rollouts run at once (``--rollouts 1000`` would ask for
1000); starting more than memory and cores allow thrashes or kills the machine long before
the run ends. The pool is cut to what fits and the rest of the rollouts queue for a desktop
(every strategy borrows from the pool and waits while all are lent out); a machine with room
for none is refused in one line.

The budget per desktop is `EnvironmentConfig.desktop_memory_mib` (an Xvfb screen, window
manager, controller server and executor measure about 120 MiB PSS; an office application
adds a few hundred) and `desktops_per_core` (8 desktops were driven on 2 cores within the
latency goals); both are settings, so a bigger or smaller task mix can say otherwise.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

from .config import EnvironmentConfig

__all__ = ["CapacityError", "MachineRoom", "desktops_that_fit", "machine_room", "plan_desktops", "plan_spares"]

_log = logging.getLogger(__name__)


class CapacityError(EnvError):
    """This machine has no room for even one desktop; the message says what to change."""


@dataclass(frozen=True, slots=True)
class MachineRoom:
    """What this machine has free for desktops."""

    memory_mib: int
    """Memory available without swapping (the kernel's MemAvailable)."""
    cores: int
    """Cores this process may run on."""


def machine_room(meminfo: Path = Path("/proc/meminfo")) -> MachineRoom:
    """This machine's available memory and usable cores, read now."""
    available_kib = None
    for line in meminfo.read_text().splitlines():
        if line.startswith("MemAvailable:"):
            available_kib = int(line.split()[1])
            break
    if available_kib is None:
        raise CapacityError(f"{meminfo} has no MemAvailable line: cannot tell how many desktops fit")
    return MachineRoom(memory_mib=available_kib // 1024, cores=len(os.sched_getaffinity(0)))


def desktops_that_fit(room: MachineRoom, *, memory_mib: int, per_core: float) -> int:
    """Desktops that fit both in memory and on the cores (0 if none does)."""
    return max(0, min(room.memory_mib // memory_mib, int(room.cores * per_core)))


def plan_desktops(requested: int, cfg: EnvironmentConfig, room: MachineRoom | None = None) -> int:
    """How many of `requested` local desktops to start: all when they fit, else as many as
    fit (the rollouts queue for them). `CapacityError` when not even one fits."""
    room = room or machine_room()
    memory = cfg.desktop_memory_mib * (2 if cfg.spare is True else 1)  # a spare asked for is budgeted too
    fit = desktops_that_fit(room, memory_mib=memory, per_core=cfg.desktops_per_core)
    if fit < 1:
        raise CapacityError(
            f"this machine has room for no desktop: {room.memory_mib} MiB of memory available and "
            f"{room.cores} cores, a desktop is budgeted {memory} MiB and "
            f"1/{cfg.desktops_per_core:g} core: free memory, or lower environment.desktop_memory_mib"
        )
    if requested > fit:
        _log.warning(
            "%d desktops asked for, %d fit on this machine (%d MiB available, %d cores): "
            "starting %d; the other rollouts wait for a free desktop",
            requested, fit, room.memory_mib, room.cores, fit,
        )
    return min(requested, fit)


def plan_spares(desktops: int, cfg: EnvironmentConfig, room: MachineRoom | None = None) -> bool:
    """Whether each of `desktops` local desktops keeps a spare sandbox for fast reverts.

    A spare is a whole second desktop at rest, so it is budgeted a desktop's memory (it uses
    no core while it waits). ``spare: None`` turns them on only when they fit beside the
    desktops, and says so in one line when they do not.
    """
    if cfg.spare is not None:
        return cfg.spare
    room = room or machine_room()
    needed = 2 * desktops * cfg.desktop_memory_mib
    if room.memory_mib >= needed:
        return True
    _log.warning(
        "no room for spare desktops (%d MiB available, %d MiB needed for %d desktops and their spares): "
        "reverts start a new sandbox (about 1 s each, more under load); set environment.spare: true to keep "
        "spares on fewer desktops",
        room.memory_mib, needed, desktops,
    )
    return False
