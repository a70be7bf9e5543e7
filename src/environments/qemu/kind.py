"""The ``qemu`` kind: OSWorld's VM image (or any image whose server speaks its protocol)
under QEMU on this machine, without Docker: live snapshots, forks, checkpoints."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, cast

from pydantic import Field

from core.protocols import EnvError

from ..kinds import EnvironmentKind, EnvironmentSettings, PoolRequest, register
from ..pool import EnvironmentPool
from .provider import QemuProvider

__all__ = ["QemuSettings"]


class QemuSettings(EnvironmentSettings):
    """VMs of a disk image under QEMU on this machine, forked from one live snapshot."""

    kind: Literal["qemu"] = "qemu"
    image: Path | None = None
    """The VM's disk image (qcow2 or raw), e.g. OSWorld's Ubuntu.qcow2; it is only ever read.
    An image with a ``.boot.json`` sidecar boots its kernel directly (the test image of
    `python -m environments.qemu.image`)."""
    memory_mib: int = Field(default=4096, ge=256)
    """Guest memory per VM (OSWorld's Docker provider gives 4 GB); also the capacity check's
    budget per VM, with QEMU's own overhead."""
    cpus: int = Field(default=4, ge=1)
    """Virtual CPUs per VM (OSWorld's Docker provider gives 4), at most this machine's cores."""
    vms_per_core: float = Field(default=2.0, gt=0)
    """VMs run at once per core of this machine, at most; further rollouts queue."""
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    """``auto`` boots a probe kernel under KVM and uses KVM only if the guest gets through
    (else software emulation, said once); ``kvm`` or ``tcg`` force one."""
    network: Literal["off", "task", "on"] = "task"
    """Internet for the VMs: ``task`` gives it only to a task that needs it, ``off`` to none,
    ``on`` to every task; QEMU's user-mode NAT, kept off this machine's own addresses."""
    snapshot_after_setup: bool = False
    """Snapshot each task's set-up state once and fork its other rollouts from it, instead of
    running the setup again for each (faster; the paper runs the setup per rollout)."""
    base_dir: Path | None = None
    """Where VMs keep their overlays and checkpoints; None is $AGENT_S3_ENV_DIR/qemu or
    /tmp/agent-s3/envs/qemu."""
    snapshot_cache: Path | None = None
    """Where boot snapshots are kept for later runs (the same image, QEMU and machine restore
    the same saved boot); None is $AGENT_S3_CACHE/qemu/snapshots (~/.cache/agent-s3/...)."""
    boot_timeout: float = Field(default=900.0, gt=0)
    """Seconds a cold boot may take until the image's server answers."""
    action_timeout: float = Field(default=30.0, gt=0)
    """Seconds one GUI action may run."""

    def where(self) -> str:
        return f"VMs of {self.image} under QEMU"

    def check(self) -> None:
        if self.image is None:
            raise EnvError("--env qemu needs a disk image: pass --image PATH.qcow2 (OSWorld's Ubuntu.qcow2, "
                           "or the test image `python -m environments.qemu.image` builds)")
        if not Path(self.image).expanduser().is_file():
            raise EnvError(f"--image {self.image}: no such file")
        if os.geteuid() != 0:
            raise EnvError("--env qemu runs each VM under a uid of its own, which needs root (sudo)")


@asynccontextmanager
async def open_qemu_pool(cfg: QemuSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    """Boot (or find) the image's live snapshot and fork `request.size` VMs from it."""
    cfg.check()
    provider = QemuProvider(
        request.size, image=Path(str(cfg.image)), memory_mib=cfg.memory_mib, cpus=cfg.cpus,
        accel=cfg.accel, network=cfg.network, base_dir=cfg.base_dir, snapshot_cache=cfg.snapshot_cache,
        boot_timeout=cfg.boot_timeout, snapshot_after_setup=cfg.snapshot_after_setup, with_sandbox=cfg.sandbox,
        action_timeout=cfg.action_timeout, vms_per_core=cfg.vms_per_core,
    )  # fmt: skip
    async with provider:
        yield cast(EnvironmentPool, provider)  # it lends and takes back only its own


register(EnvironmentKind(
    name="qemu",
    settings=QemuSettings,
    description="VMs of a disk image (--image) under QEMU on this machine, forked from live snapshots",
    open_pool=open_qemu_pool,
))
