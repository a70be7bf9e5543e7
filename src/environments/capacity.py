"""How many environments of this machine (local desktops, VMs) can run at once, decided
before any starts.

A run asks for as many environments as rollouts run at once (``--rollouts 1000`` would ask
for 1000); starting more than memory and cores allow thrashes or kills the machine long
before the run ends. The pool is cut to what fits and the rest of the rollouts queue for one
(every strategy borrows from the pool and waits while all are lent out); a machine with room
for none is refused in one line.

Each kind that starts environments here gives its budget per environment: a local desktop's
is `LocalSettings.desktop_memory_mib` (an Xvfb screen, window manager, controller server and
executor measure about 120 MiB PSS; an office application adds a few hundred) and
`desktops_per_core` (8 desktops were driven on 2 cores within the latency goals); a VM's is
its guest memory and cores. They are settings, so a bigger or smaller task mix can say otherwise.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from core.protocols import EnvError

__all__ = ["CapacityError", "MachineRoom", "desktops_that_fit", "machine_room", "plan_fleet"]

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


def plan_fleet(requested: int, room: MachineRoom, *, memory_mib: int, per_core: float, what: str = "desktop",
               lower: str = "environment.desktop_memory_mib") -> int:
    """How many of `requested` environments to start: all when they fit, else as many as fit
    (the rollouts queue for them). `CapacityError` when not even one fits; `lower` names the
    setting to lower then."""
    fit = desktops_that_fit(room, memory_mib=memory_mib, per_core=per_core)
    if fit < 1:
        raise CapacityError(
            f"this machine has room for no {what}: {room.memory_mib} MiB of memory available and "
            f"{room.cores} cores, a {what} is budgeted {memory_mib} MiB and "
            f"1/{per_core:g} core: free memory, or lower {lower}"
        )
    if requested > fit:
        _log.warning(
            "%d %ss asked for, %d fit on this machine (%d MiB available, %d cores): "
            "starting %d; the other rollouts wait for a free %s",
            requested, what, fit, room.memory_mib, room.cores, fit, what,
        )
    return min(requested, fit)
