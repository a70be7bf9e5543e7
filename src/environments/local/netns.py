"""The internet for a desktop whose task needs it, without the host's own network.

A desktop that asks for network does not share the host's network namespace (that would
hand the model the host's loopback: 127.0.0.1 forwarders, databases, the Ray dashboard).
It gets a namespace of its own behind a user-mode NAT, slirp4netns, on the private
10.0.2.0/24 (desktop 10.0.2.100, gateway 10.0.2.2, DNS 10.0.2.3), with
``--disable-host-loopback`` so the gateway is no door to the host's 127.0.0.1.

slirp4netns itself opens its connections from the host's namespace, so a connection from
the desktop to one of the host's own addresses (its LAN address, say, where services listen
on 0.0.0.0) would land on the host. To stop that, slirp4netns runs as a uid leased for it
from the desktops' range, never as root, and one nftables table (`TABLE`) rejects what any
uid of that range sends to an address of this machine, to loopback and to link-local
addresses (cloud metadata services), and anything not routed out through the machine's way
to the internet (`uplinks`: the interfaces of its default routes), so another network
namespace of this machine (a container behind a bridge or veth) is out of reach too. The
table only ever matches the desktops' uids, so the host's own traffic is untouched. An unprivileged slirp4netns can only configure a
namespace its uid owns: the namespace belongs to a user namespace made by that uid (the
desktop's own processes run under another uid and have no capability in it), and the tun
device is given to the uid in slirp4netns's own mount namespace only.

Both helper processes (the namespace's holder and slirp4netns) end when the desktop's owner
closes the pipe they wait on, however the owner dies.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from core.protocols import EnvError
from environments.egress import egress_rules as _egress_rules
from environments.egress import install_egress_rules as _install
from environments.walls.uids import FIRST_UID, SLOTS, UidLease, lease_uid

__all__ = ["GATEWAY", "GUEST_ADDRESS", "GUEST_DNS", "SUBNET", "TABLE", "DesktopNetwork", "egress_rules", "uplinks"]

SUBNET = "10.0.2.0/24"
GUEST_ADDRESS = "10.0.2.100"
GATEWAY = "10.0.2.2"
GUEST_DNS = "10.0.2.3"
#: The nftables table (family inet) that keeps the desktops' NAT off the host's addresses.
TABLE = "agent_s3_desktops"
_PATH = "/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_READY_S = 15.0
_IFNAME = re.compile(r"[A-Za-z0-9_.@:-]{1,15}")

#: Runs as root in a private mount namespace: a tun node owned by the helper uid replaces
#: /dev/net/tun there only, then slirp4netns starts as that uid.
_SLIRP = (
    'mknod -m 0600 "$1" c 10 200 && chown "$2:$2" "$1" && mount --bind "$1" /dev/net/tun && rm -f "$1" '
    '|| { echo "error: cannot hand the tun device to the network helper (needs /dev/net/tun)" >&2; exit 1; }; '
    'shift 2; exec "$@"'
)


def uplinks() -> list[str]:
    """The interfaces through which this machine reaches the internet: those of its default
    routes and of its routes to a public address (IPv4 and IPv6)."""
    found: list[str] = []
    for argv in (
        ["ip", "-j", "route", "show", "default"],
        ["ip", "-6", "-j", "route", "show", "default"],
        ["ip", "-j", "route", "get", "1.1.1.1"],
        ["ip", "-6", "-j", "route", "get", "2606:4700:4700::1111"],
    ):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
            routes = json.loads(done.stdout or "[]")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            continue
        for route in routes if isinstance(routes, list) else []:
            dev = route.get("dev") if isinstance(route, dict) else None
            if isinstance(dev, str) and _IFNAME.fullmatch(dev) and dev not in found:
                found.append(dev)
    return found


def egress_rules(
    first_uid: int = FIRST_UID, last_uid: int = FIRST_UID + SLOTS - 1, outside: Sequence[str] = ()
) -> str:
    """The nftables script that (re)defines `TABLE` atomically (`environments.egress`).
    ``outside``: the interfaces of the way out (`uplinks`); what the NAT sends anywhere else
    (another network namespace of this machine behind a bridge or veth, a container) is
    rejected."""
    return _egress_rules(TABLE, first_uid, last_uid, outside=outside)


def install_egress_rules() -> None:
    """Define `TABLE` (idempotent, atomic; other runs' desktops share it)."""
    _install(egress_rules(outside=uplinks()), needed_by="a desktop with network", whose="the desktops'")


def _needs(tool: str, package: str) -> None:
    if shutil.which(tool, path=_PATH) is None:
        raise EnvError(f"a desktop with network needs {tool}; install it (apt-get install {package})")


class DesktopNetwork:
    """One desktop's network namespace behind slirp4netns; `enter_argv` runs a command in it."""

    def __init__(self, folder: Path) -> None:
        """``folder``: the desktop's root-only host folder (holds resolv.conf)."""
        self.folder = folder
        self.resolv_conf = folder / "resolv.conf"
        self._lease: UidLease | None = None
        self._holder: subprocess.Popen[bytes] | None = None
        self._slirp: subprocess.Popen[bytes] | None = None
        self._keep_w = -1

    @property
    def uid(self) -> int | None:
        return None if self._lease is None else self._lease.uid

    def start(self) -> None:
        """Make the namespace and attach the NAT; waits until it is configured."""
        for tool, package in (
            ("slirp4netns", "slirp4netns"),
            ("unshare", "util-linux"),
            ("nsenter", "util-linux"),
        ):
            _needs(tool, package)
        if not os.path.exists("/dev/net/tun"):
            raise EnvError("a desktop with network needs /dev/net/tun; load the tun module (modprobe tun)")
        install_egress_rules()
        self.resolv_conf.write_text(f"nameserver {GUEST_DNS}\n")
        self.resolv_conf.chmod(0o644)
        self._lease = lease_uid()
        uid = self._lease.uid
        keep_r, self._keep_w = os.pipe()  # the helpers end when this write end closes
        ready_r, ready_w = os.pipe()
        drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
        env = {"PATH": _PATH, "LANG": "C.UTF-8"}
        try:
            self._holder = subprocess.Popen(
                [*drop, "unshare", "--user", "--map-root-user", "--net", "--", "cat"],
                stdin=keep_r, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env, process_group=0, close_fds=True,
            )  # fmt: skip
            ns = self._wait_namespace()
            slirp = [
                "slirp4netns", "--configure", "--disable-host-loopback", "--enable-seccomp",
                f"--cidr={SUBNET}", f"--ready-fd={ready_w}", f"--exit-fd={keep_r}",
                f"--userns-path={ns}/user", "--netns-type=path", f"{ns}/net", "tap0",
            ]  # fmt: skip
            node = self.folder / "tun"
            with (self.folder / "network.log").open("ab") as log:
                self._slirp = subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _SLIRP,
                     "slirp-setup", str(node), str(uid), *drop, *slirp],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                    pass_fds=(keep_r, ready_w), process_group=0, close_fds=True,
                )  # fmt: skip
        except BaseException:
            os.close(ready_r)
            os.close(ready_w)
            os.close(keep_r)
            self.close()
            raise
        os.close(ready_w)
        os.close(keep_r)
        try:
            self._wait_ready(ready_r)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(ready_r)

    def enter_argv(self) -> list[str]:
        """A command prefix that runs the rest in this namespace (root joins it by path)."""
        if self._holder is None or self._holder.poll() is not None:
            raise EnvError("the desktop's network namespace is gone; revert the desktop again")
        return ["nsenter", f"--net=/proc/{self._holder.pid}/ns/net", "--"]

    def alive(self) -> bool:
        return all(p is not None and p.poll() is None for p in (self._holder, self._slirp))

    def close(self) -> None:
        """Stop slirp4netns and the namespace, give the uid back; safe to call twice."""
        if self._keep_w >= 0:
            os.close(self._keep_w)
            self._keep_w = -1
        for attr in ("_slirp", "_holder"):
            proc = getattr(self, attr)
            setattr(self, attr, None)
            if proc is None:
                continue
            if proc.poll() is None:
                proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
                pass
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    def _wait_namespace(self) -> str:
        """``/proc/<holder>/ns`` once the holder has left the host's user namespace."""
        assert self._holder is not None
        ns = f"/proc/{self._holder.pid}/ns"
        own = os.readlink("/proc/self/ns/user")
        deadline = time.monotonic() + _READY_S
        while time.monotonic() < deadline:
            if self._holder.poll() is not None:
                raise EnvError(
                    "cannot make the desktop's network namespace (unshare --user --net as its "
                    "helper uid failed; are user namespaces enabled? sysctl user.max_user_namespaces)"
                )
            try:
                if os.readlink(f"{ns}/user") != own:
                    return ns
            except OSError:
                pass
            time.sleep(0.01)
        raise EnvError("the desktop's network namespace did not appear in time")

    def _wait_ready(self, fd: int) -> None:
        deadline = time.monotonic() + _READY_S
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EnvError(f"slirp4netns did not configure the desktop's network within {_READY_S:g} s")
            ready, _, _ = select.select([fd], [], [], min(left, 0.2))
            if ready:
                if os.read(fd, 16):
                    return
                raise EnvError(f"slirp4netns failed: {self._log_tail()}")
            if self._slirp is not None and self._slirp.poll() is not None:
                raise EnvError(f"slirp4netns failed: {self._log_tail()}")

    def _log_tail(self) -> str:
        try:
            lines = (self.folder / "network.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        errors = [line for line in lines if "error" in line.lower() or "failed" in line.lower()]
        return " | ".join((errors or lines)[-3:]) or "(no output)"
