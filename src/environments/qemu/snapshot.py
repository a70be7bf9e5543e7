"""Live snapshots: a VM's saved memory and device state plus its frozen disk chain.

A snapshot is a folder: ``state`` (QEMU's migration stream: memory and devices, written
while the VM was paused), ``disk.qcow2`` (the overlay the VM wrote until then, read-only
from then on) and ``snapshot.json`` (the machine spec every restore must repeat, the disk
chain bottom first, the parent snapshot and what the snapshot is of). The image itself is
the chain's bottom and is only ever opened read-only.

Restoring one is a new QEMU process: a fresh overlay on the snapshot's disk, the same spec,
``-incoming`` the state. Any number of VMs restore the same snapshot at once (N rollouts
forked from one), each writing only its own overlay; a snapshot of a VM that was itself
restored from one (a checkpoint mid-rollout) chains onto its parent's disk.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from core.protocols import EnvError

from .machine import BootSpec, MachineSpec
from .process import DiskFile

__all__ = ["Snapshot", "image_layers", "new_overlay"]


@dataclass(frozen=True)
class Snapshot:
    """A saved VM, restorable any number of times."""

    folder: Path
    spec: MachineSpec
    layers: tuple[DiskFile, ...]
    """The disk chain bottom first (the image, then each ancestor's disk, then this one's)."""
    label: str
    """What it is of: ``boot``, ``task <id>``, ``step <t> of <rollout>``."""
    parent: str | None = None
    created: float = 0.0
    boot_seconds: float | None = None
    """For a boot snapshot: how long the cold boot took until the server answered."""

    @property
    def id(self) -> str:
        return self.folder.name

    @property
    def state(self) -> Path:
        return self.folder / "state"

    @property
    def state_bytes(self) -> int:
        return self.state.stat().st_size

    def write(self) -> None:
        data = {
            "spec": asdict(self.spec),
            "layers": [{"path": str(layer.path), "format": layer.format} for layer in self.layers],
            "label": self.label, "parent": self.parent, "created": self.created, "boot_seconds": self.boot_seconds,
        }  # fmt: skip
        temp = self.folder / ".snapshot.json.tmp"
        temp.write_text(json.dumps(data, indent=1))
        os.replace(temp, self.folder / "snapshot.json")

    @classmethod
    def read(cls, folder: Path) -> Snapshot | None:
        """The snapshot saved in `folder`, or None when it is incomplete or gone."""
        try:
            data = json.loads((folder / "snapshot.json").read_text())
        except (OSError, ValueError):
            return None
        spec = data["spec"]
        boot = BootSpec(**spec["boot"]) if spec.get("boot") else None
        found = cls(
            folder=folder,
            spec=MachineSpec(memory_mib=spec["memory_mib"], cpus=spec["cpus"], accel=spec["accel"], boot=boot,
                             machine=spec.get("machine", "pc")),
            layers=tuple(DiskFile(Path(x["path"]), x["format"]) for x in data["layers"]),
            label=data.get("label", ""), parent=data.get("parent"), created=data.get("created", 0.0),
            boot_seconds=data.get("boot_seconds"),
        )  # fmt: skip
        if not found.state.is_file() or not all(layer.path.is_file() for layer in found.layers):
            return None
        return found

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def new_snapshot_folder(root: Path) -> Path:
    """A fresh, root-only folder for a snapshot under `root`."""
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    folder = root / f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    return folder


def freeze(path: Path) -> None:
    """Make a snapshot's disk read-only for good (nothing may write it once saved)."""
    os.chmod(path, 0o400)


def image_layers(image: Path) -> tuple[DiskFile, ...]:
    """`image`'s own chain (an image may itself be an overlay), bottom first, read-only."""
    if not image.is_file():
        raise EnvError(f"no VM image at {image}: pass --image PATH.qcow2 (OSWorld's Ubuntu.qcow2, or one "
                       "built by `python -m environments.qemu.image`)")
    done = subprocess.run(["qemu-img", "info", "--output=json", "--backing-chain", "-U", str(image)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EnvError(f"{image} is not a disk image QEMU reads: {done.stderr.strip()[:200]}")
    chain = json.loads(done.stdout)
    layers = []
    for entry in reversed(chain):
        fmt = entry.get("format")
        if fmt not in ("qcow2", "raw"):
            raise EnvError(f"{entry.get('filename')} is a {fmt} image; convert it to qcow2 with qemu-img convert")
        layers.append(DiskFile(Path(entry["filename"]).resolve(), fmt))
    return tuple(layers)


def new_overlay(path: Path, below: DiskFile) -> DiskFile:
    """A fresh, empty qcow2 overlay at `path` on `below` (its own writes only)."""
    done = subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", below.format, "-b", str(below.path),
                           "-o", "cluster_size=65536", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EnvError(f"cannot make a disk overlay at {path}: {done.stderr.strip()[:200]}")
    os.chmod(path, 0o600)
    return DiskFile(path, "qcow2", writable=True)
