"""The QEMU provider's pieces that need no VM: its command line, settings and refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.protocols import EnvError
from environments.qemu.kind import QemuSettings
from environments.qemu.machine import BootSpec, DiskLayer, MachineSpec, NetSpec, qemu_argv
from environments.qemu.network import vm_egress_rules
from runner.config import load_run_config
from runner.strategy import check_strategy


def _argv(internet: bool = False, incoming: int | None = None) -> list[str]:
    spec = MachineSpec(memory_mib=4096, cpus=4, accel="tcg", boot=BootSpec("/k", "/i", "root=/dev/vda"))
    return qemu_argv(spec, name="vm-1", disk=[DiskLayer(10, "qcow2"), DiskLayer(11, "qcow2", writable=True)],
                     net=NetSpec("52:54:00:00:00:01", {"server": 40001, "chromium": 40002}, internet),
                     serial_fd=12, monitor_fd=13, incoming_fd=incoming, boot_fds=(14, 15))


def test_qemu_gets_descriptors_only_and_a_chain_with_explicit_backing() -> None:
    argv = _argv(incoming=16)
    joined = " ".join(argv)
    paths = [a for a in argv if a.startswith("/") and not a.startswith(("/proc/self/fd/", "/dev/fdset/"))]
    assert paths == []  # no host path at all: disks, kernel, serial, monitor, state are descriptors
    nodes = [json.loads(argv[i + 1]) for i, a in enumerate(argv) if a == "-blockdev"]
    formats = [n for n in nodes if n["driver"] == "qcow2"]
    assert formats[0]["backing"] is None and formats[1]["backing"] == formats[0]["node-name"]
    assert formats[0]["read-only"] is True and formats[1]["read-only"] is False
    assert "-incoming fd:16" in joined and "socket,id=monitor,fd=13" in joined
    assert "elevateprivileges=deny" in joined and "spawn=deny" in joined
    assert "hostfwd=tcp:127.0.0.1:40001-:5000" in joined and "hostfwd=tcp:127.0.0.1:40002-:9222" in joined
    assert "restrict=on" in joined and "restrict=off" in " ".join(_argv(internet=True))
    assert "-kernel /proc/self/fd/14" in joined and "-initrd /proc/self/fd/15" in joined


def test_the_vms_egress_table_matches_their_uids_only_and_keeps_forwarded_replies() -> None:
    rules = vm_egress_rules(101000, 101999)
    lines = [line.strip() for line in rules.splitlines() if "meta skuid" in line]
    assert lines and all(line.startswith("meta skuid 101000-101999") for line in lines)
    assert "ct state established,related accept" in lines[0]  # the host's connections to a forwarded port
    assert any("fib daddr type local reject" in line for line in lines)


def test_qemu_settings_say_what_is_missing_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(EnvError, match="--env qemu needs a disk image: pass --image"):
        QemuSettings().check()
    with pytest.raises(EnvError, match="no such file"):
        QemuSettings(image=tmp_path / "missing.qcow2").check()
    cfg = load_run_config(["environment.kind=qemu", "environment.image=/x.qcow2"])
    assert isinstance(cfg.environment, QemuSettings) and cfg.environment.memory_mib == 4096
    assert cfg.environment.cpus == 4  # OSWorld's Docker defaults


def test_branch_settings_are_checked_before_anything_starts() -> None:
    with pytest.raises(ValueError, match="need --strategy branch"):
        check_strategy(load_run_config(["branch.at=3"]))
    with pytest.raises(ValueError, match="leaves no step to branch"):
        check_strategy(load_run_config(["strategy=branch", "branch.at=50", "rollout.max_steps=50"]))
    with pytest.raises(ValueError, match="drop --executor ray"):
        check_strategy(load_run_config(["strategy=branch", "executor.kind=ray"]))
    check_strategy(load_run_config(["strategy=branch", "branch.at=2", "branch.branches=3"]))
