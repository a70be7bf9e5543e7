"""Real QEMU on the test image: built once per machine (cached), booted once per machine
(its live snapshot cached too), then every test forks VMs from that snapshot.

Software emulation here (KVM guests hang on this machine; the provider finds that out by
itself). VMs get 1 GiB and one core each to keep the suite within a few minutes on 2 cores.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from qemu_helpers import provider_for, qemu_missing

from environments.qemu.image import BuiltImage, default_cache, ensure_test_image
from environments.qemu.provider import QemuProvider


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


@pytest.fixture
async def two_vms(test_image: BuiltImage, tmp_path: Path, snapshot_cache: Path) -> AsyncIterator[QemuProvider]:
    async with provider_for(test_image, tmp_path / "vms", snapshot_cache, 2) as provider:
        yield provider
