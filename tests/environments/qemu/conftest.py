"""Real QEMU on the test image: built once per machine (cached), booted once per machine
(its live snapshot cached too), then every test forks VMs from that snapshot.

Software emulation here (KVM guests hang on this machine; the provider finds that out by
itself). VMs get 1 GiB and one core each to keep the suite within a few minutes on 2 cores.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from environments.qemu.image import BuiltImage, default_cache, ensure_test_image
from environments.qemu.provider import QemuProvider

_NEEDS = ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "mke2fs", "setpriv")


def qemu_missing() -> str | None:
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (bash scripts/setup.sh installs them)"
    if os.geteuid() != 0:
        return "VMs run under uids of their own, which needs root"
    return None


@pytest.fixture(scope="session")
def test_image() -> BuiltImage:
    reason = qemu_missing()
    if reason is not None:
        pytest.skip(reason)
    return ensure_test_image(say=print)


@pytest.fixture(scope="session")
def snapshot_cache() -> Path:
    """Boot snapshots kept across sessions (the cold boot is paid once per machine)."""
    return default_cache() / "snapshots"


def provider_for(image: BuiltImage, base: Path, cache: Path, size: int, **kw: object) -> QemuProvider:
    return QemuProvider(size, image=image.path, memory_mib=1024, cpus=1, base_dir=base, snapshot_cache=cache,
                        **kw)  # type: ignore[arg-type]


@pytest.fixture
async def two_vms(test_image: BuiltImage, tmp_path: Path, snapshot_cache: Path) -> AsyncIterator[QemuProvider]:
    async with provider_for(test_image, tmp_path / "vms", snapshot_cache, 2) as provider:
        yield provider
