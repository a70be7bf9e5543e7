"""Keeping a VM with the internet off this machine's own addresses.

QEMU's user-mode network (slirp) opens the guest's connections from the host as QEMU's
own uid. Without a rule, a guest reaching 10.0.2.2 or this machine's LAN address would land
on the host's services. One nftables table (`TABLE`), matching only the VMs' uid range,
rejects what those uids send to an address of this machine, to loopback and to link-local
addresses (cloud metadata), as the desktops' table does for theirs (`environments.egress`). Replies on connections
the host opened to a VM (its forwarded server port on 127.0.0.1) stay allowed. A VM whose
task does not need the internet has ``restrict=on``: no route out at all.
"""

from __future__ import annotations

import threading

from environments.egress import egress_rules, install_egress_rules

__all__ = ["TABLE", "install_vm_egress_rules", "vm_egress_rules"]

TABLE = "agent_s3_vms"
_DONE: set[tuple[int, int]] = set()
_LOCK = threading.Lock()


def vm_egress_rules(first_uid: int, last_uid: int) -> str:
    """The nftables script that (re)defines `TABLE` atomically (`environments.egress`)."""
    return egress_rules(TABLE, first_uid, last_uid, replies=True)


def install_vm_egress_rules(first_uid: int, last_uid: int) -> None:
    """Define `TABLE` once per process (idempotent and atomic; other runs' VMs share it)."""
    with _LOCK:
        if (first_uid, last_uid) in _DONE:
            return
        install_egress_rules(vm_egress_rules(first_uid, last_uid), needed_by="a VM with the internet",
                             whose="the VMs'")
        _DONE.add((first_uid, last_uid))
