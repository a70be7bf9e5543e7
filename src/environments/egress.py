"""Keeping the machines' user-mode NAT off this machine's own addresses: one nftables table.

A desktop's slirp4netns (`environments.local.netns`) and a VM's QEMU slirp
(`environments.qemu.network`) open the guest's connections from the host, as a uid leased
from their kind's range. Without a rule, a guest reaching its gateway or this machine's LAN
address would land on the host's services. Each kind's table, matching only its uid range,
rejects what those uids send to an address of this machine, to loopback and to link-local
addresses (cloud metadata), and, given the interfaces of the way out, anything routed
elsewhere (another network namespace behind a bridge or veth). The host's own traffic is
never matched. The script (re)defines the table atomically, so runs sharing it never see it
half made.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from core.protocols import EnvError

__all__ = ["egress_rules", "install_egress_rules"]

_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def egress_rules(table: str, first_uid: int, last_uid: int, *, replies: bool = False,
                 outside: Sequence[str] = ()) -> str:
    """The nftables script that (re)defines ``table`` for uids `first_uid`..`last_uid`.

    ``replies``: packets of connections the host opened to the guest (a VM's forwarded server
    port) stay allowed. ``outside``: the interfaces of the way out (`netns.uplinks`); without
    any, only the rules for this machine's own addresses apply."""
    uids = f"meta skuid {first_uid}-{last_uid}"
    names = ", ".join(f'"{name}"' for name in outside)
    elsewhere = (
        [f"    {uids} meta l4proto tcp oifname != {{ {names} }} reject with tcp reset",
         f"    {uids} oifname != {{ {names} }} reject"]
        if outside else []
    )  # fmt: skip
    return "\n".join([
        f"table inet {table} {{}}",
        f"delete table inet {table}",
        f"table inet {table} {{",
        "  chain egress {",
        "    type filter hook output priority 0; policy accept;",
        *([f"    {uids} ct state established,related accept"] if replies else []),
        f"    {uids} meta l4proto tcp fib daddr type local reject with tcp reset",
        f"    {uids} fib daddr type local reject",
        f"    {uids} meta l4proto tcp ip daddr {{ 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 }} reject with tcp reset",
        f"    {uids} ip daddr {{ 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 }} reject",
        f"    {uids} meta l4proto tcp ip6 daddr {{ ::1, fe80::/10 }} reject with tcp reset",
        f"    {uids} ip6 daddr {{ ::1, fe80::/10 }} reject",
        *elsewhere,
        "  }",
        "}",
        "",
    ])  # fmt: skip


def install_egress_rules(script: str, *, needed_by: str, whose: str) -> None:
    """Load `script` with ``nft``; ``needed_by`` ("a desktop with network") and ``whose``
    ("the desktops'") name the machines in the one error line."""
    if shutil.which("nft", path=_PATH) is None:
        raise EnvError(f"{needed_by} needs nftables to keep it off this machine's own addresses; "
                       "install it (apt-get install nftables) or run with --network off")
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise EnvError(f"cannot install {whose} nftables rules: {done.stderr.strip() or done.returncode}")
