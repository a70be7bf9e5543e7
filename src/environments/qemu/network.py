"""Keeping a VM with the internet off this machine's own addresses.

QEMU's user-mode network (slirp) opens the guest's connections from the host as QEMU's
own uid. Without a rule, a guest reaching 10.0.2.2 or this machine's LAN address would land
on the host's services. One nftables table (`TABLE`), matching only the VMs' uid range,
rejects what those uids send to an address of this machine, to loopback and to link-local
addresses (cloud metadata), as the desktops' table does for theirs. Replies on connections
the host opened to a VM (its forwarded server port on 127.0.0.1) stay allowed. A VM whose
task does not need the internet has ``restrict=on``: no route out at all.
"""

from __future__ import annotations

import shutil
import subprocess
import threading

from core.protocols import EnvError

__all__ = ["TABLE", "install_vm_egress_rules", "vm_egress_rules"]

TABLE = "agent_s3_vms"
_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_DONE: set[tuple[int, int]] = set()
_LOCK = threading.Lock()


def vm_egress_rules(first_uid: int, last_uid: int) -> str:
    """The nftables script that (re)defines `TABLE` atomically."""
    uids = f"meta skuid {first_uid}-{last_uid}"
    return "\n".join([
        f"table inet {TABLE} {{}}",
        f"delete table inet {TABLE}",
        f"table inet {TABLE} {{",
        "  chain egress {",
        "    type filter hook output priority 0; policy accept;",
        f"    {uids} ct state established,related accept",
        f"    {uids} meta l4proto tcp fib daddr type local reject with tcp reset",
        f"    {uids} fib daddr type local reject",
        f"    {uids} meta l4proto tcp ip daddr {{ 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 }} reject with tcp reset",
        f"    {uids} ip daddr {{ 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 }} reject",
        f"    {uids} meta l4proto tcp ip6 daddr {{ ::1, fe80::/10 }} reject with tcp reset",
        f"    {uids} ip6 daddr {{ ::1, fe80::/10 }} reject",
        "  }",
        "}",
        "",
    ])  # fmt: skip


def install_vm_egress_rules(first_uid: int, last_uid: int) -> None:
    """Define `TABLE` once per process (idempotent and atomic; other runs' VMs share it)."""
    with _LOCK:
        if (first_uid, last_uid) in _DONE:
            return
        if shutil.which("nft", path=_PATH) is None:
            raise EnvError("a VM with the internet needs nftables to keep it off this machine's own addresses; "
                           "install it (apt-get install nftables) or run with --network off")
        done = subprocess.run(["nft", "-f", "-"], input=vm_egress_rules(first_uid, last_uid), capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            raise EnvError(f"cannot install the VMs' nftables rules: {done.stderr.strip() or done.returncode}")
        _DONE.add((first_uid, last_uid))
