"""Helpers of the QEMU tests (imported by the tests and by conftest)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from environments.qemu.image import BuiltImage
from environments.qemu.provider import QemuProvider

_NEEDS = ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "mke2fs", "setpriv")


def qemu_missing() -> str | None:
    missing = [tool for tool in _NEEDS if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (bash scripts/setup.sh installs them)"
    if os.geteuid() != 0:
        return "VMs run under uids of their own, which needs root"
    return None


def provider_for(image: BuiltImage, base: Path, cache: Path, size: int, **kw: object) -> QemuProvider:
    """A pool of small VMs (1 GiB, one core) on the test image."""
    return QemuProvider(size, image=image.path, memory_mib=1024, cpus=1, base_dir=base, snapshot_cache=cache,
                        **kw)  # type: ignore[arg-type]
