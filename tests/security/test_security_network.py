"""A desktop whose task needs the internet reaches it through its own user-mode NAT, and
still nothing of this machine: not the host's loopback (a listener on 127.0.0.1, through the
NAT's gateway or directly), not the host's other addresses (a listener on 0.0.0.0 reached by
the machine's LAN address), not link-local metadata addresses. Without a task that needs it
the desktop has loopback only, before and after."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from security_helpers import Tally, shell

from environments.local import DesktopConfig, LocalDesktop
from environments.local.netns import GATEWAY, TABLE
from environments.local.spawner import run_blocking

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]

#: Package registries: the only internet this machine's own network reaches.
_REGISTRIES = (("deb.debian.org", 80), ("pypi.org", 443))

_PROBE = """
import json, socket, sys
out = {}
for host, port in json.loads(sys.argv[1]):
    s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)
    s.settimeout(4)
    try:
        s.connect((host, port))
        out[f"{host}:{port}"] = "connected"
    except OSError as exc:
        out[f"{host}:{port}"] = type(exc).__name__
    finally:
        s.close()
routes = open('/proc/net/route').read().splitlines()[1:]
out["routes"] = len(routes)
print(json.dumps(out))
"""


class _Listener:
    """A host TCP listener that counts the connections it accepts."""

    def __init__(self, host: str) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


def _host_addresses() -> list[str]:
    """This machine's own IPv4 addresses other than loopback (from the kernel's local table)."""
    found: set[str] = set()
    lines = Path("/proc/net/fib_trie").read_text().splitlines()
    for i, line in enumerate(lines):
        if "/32 host LOCAL" in line and i > 0:
            address = lines[i - 1].split()[-1]
            if not address.startswith("127."):
                found.add(address)
    return sorted(found)


def _host_reaches(targets: tuple[tuple[str, int], ...]) -> list[tuple[str, int]]:
    """Which registries this machine itself reaches: asked in a child process, since this
    suite's own process may reach loopback only (a machine offline skips only that half)."""
    code = (
        "import json, socket, sys\n"
        "ok = []\n"
        "for h, p in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        socket.create_connection((h, p), timeout=5).close(); ok.append([h, p])\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps(ok))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, json.dumps(targets)], capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return [(h, p) for h, p in json.loads(done.stdout)]


def _network_missing() -> str | None:
    """Why a networked desktop cannot start here (None: it can)."""
    lacking = [
        tool for tool in ("slirp4netns", "nft", "nsenter", "Xvfb", "bwrap") if shutil.which(tool) is None
    ]
    if not Path("/dev/net/tun").exists():
        lacking.append("/dev/net/tun (modprobe tun)")
    if os.geteuid() != 0:
        lacking.append("root")
    if not lacking:
        return None
    return f"networked desktops need {', '.join(lacking)} (bash scripts/setup.sh installs slirp4netns and nftables)"


@pytest.fixture
def listeners() -> Iterator[tuple[_Listener, _Listener]]:
    loop, wide = _Listener("127.0.0.1"), _Listener("0.0.0.0")
    yield loop, wide
    loop.close()
    wide.close()


async def _probe(desktop: LocalDesktop, targets: list[tuple[str, int]]) -> dict[str, object]:
    out = await shell(
        desktop, f"python3 -c {shlex.quote(_PROBE)} {shlex.quote(json.dumps(targets))}", timeout=60
    )
    return json.loads(out.strip().splitlines()[-1])


async def test_a_task_that_needs_the_internet_gets_a_nat_that_cannot_reach_the_host(
    tmp_path_factory: pytest.TempPathFactory, listeners: tuple[_Listener, _Listener], tally: Tally
) -> None:
    missing = _network_missing()
    if missing:
        pytest.skip(missing)
    loop, wide = listeners
    host_targets = [
        (GATEWAY, loop.port), (GATEWAY, wide.port), ("127.0.0.1", loop.port), ("127.0.0.1", wide.port),
        *((address, wide.port) for address in _host_addresses()), ("169.254.169.254", 80),
    ]  # fmt: skip
    reachable = _host_reaches(_REGISTRIES)
    desktop = LocalDesktop("netted", tmp_path_factory.mktemp("security-net"), DesktopConfig(snapshot="blank"),
                           pool="security-net")  # fmt: skip
    await run_blocking(desktop.start)
    try:
        before = await _probe(desktop, [*reachable, *host_targets])
        assert not desktop.network and not desktop.info().network
        await run_blocking(lambda: desktop.revert(needs_network=True))
        assert desktop.network and desktop.info().network
        assert not desktop.last_revert_used_spare  # the waiting spare was offline: dropped
        netted = await _probe(desktop, [*reachable, *host_targets])
        await run_blocking(lambda: desktop.revert(needs_network=False))
        assert not desktop.network and not desktop.last_revert_used_spare  # its spare was netted
        await run_blocking(lambda: desktop.revert(needs_network=False))
        assert not desktop.network and desktop.last_revert_used_spare  # an offline spare, swapped in
        after = await _probe(desktop, [*reachable, *host_targets])
    finally:
        await run_blocking(desktop.close)
    # Without a task that needs it: no route at all, nothing reached.
    for seen in (before, after):
        assert seen["routes"] == 0, seen
        assert all(v != "connected" for k, v in seen.items() if k != "routes"), seen
    # With it: the registries the host reaches are reached from inside too ...
    assert netted["routes"] > 0, netted
    for host, port in reachable:
        assert netted[f"{host}:{port}"] == "connected", netted
    print(f"registries reached from inside: {len(reachable)} of {len(_REGISTRIES)} ({reachable})")
    # ... and nothing of the host is.
    escaped = [f"{h}:{p}" for h, p in host_targets if netted[f"{h}:{p}"] == "connected"]
    if loop.accepted or wide.accepted:
        escaped.append(f"host listeners accepted {loop.accepted + wide.accepted} connections")
    tally.attempt("; ".join(escaped) or None)
    assert not tally.escapes, tally.escapes


def test_the_egress_table_matches_only_the_desktops_uids() -> None:
    from environments.local.netns import egress_rules
    from environments.walls.uids import FIRST_UID, SLOTS

    rules = egress_rules()
    assert f"table inet {TABLE} {{" in rules and f"delete table inet {TABLE}" in rules
    body = [line.strip() for line in rules.splitlines() if "reject" in line]
    assert body and all(line.startswith(f"meta skuid {FIRST_UID}-{FIRST_UID + SLOTS - 1} ") for line in body)
    assert any("fib daddr type local" in line for line in body)  # every address of this machine
    assert any("169.254.0.0/16" in line for line in body)  # cloud metadata


def test_a_confinement_never_shares_the_hosts_network(tmp_path: Path) -> None:
    """Without a prepared namespace the sandbox gets its own (loopback only); with one it
    joins that namespace and sees the NAT's resolver; the two never come apart."""
    from core.protocols import EnvError
    from environments.local.confine import Confinement

    home = tmp_path / "home"
    offline = Confinement(uid=100500, gid=100500, home=home).argv(["true"], passwd_fd=3, group_fd=4)
    assert offline[0] == "bwrap" and "--unshare-net" in offline and "/etc/resolv.conf" not in offline
    resolv = tmp_path / "resolv.conf"
    enter = ("nsenter", "--net=/proc/4242/ns/net", "--")
    netted = Confinement(uid=100500, gid=100500, home=home, netns=enter, resolv_conf=resolv)
    argv = netted.argv(["true"], passwd_fd=3, group_fd=4)
    assert tuple(argv[:3]) == enter and argv[3] == "bwrap" and "--unshare-net" not in argv
    i = argv.index("/etc/resolv.conf")
    assert argv[i - 2 : i] == ["--ro-bind", str(resolv)]
    for half in ({"netns": enter}, {"resolv_conf": resolv}):
        with pytest.raises(EnvError):
            Confinement(uid=100500, gid=100500, home=home, **half).argv(["true"], passwd_fd=3, group_fd=4)


async def test_the_network_mode_overrides_the_task(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``off`` keeps even a task that needs the internet on loopback; ``on`` gives every
    start and revert the NAT."""
    missing = _network_missing()
    if missing:
        pytest.skip(missing)
    base = tmp_path_factory.mktemp("security-net-modes")
    seen = {}
    for mode in ("off", "on"):
        desktop = LocalDesktop(
            f"net-{mode}", base, DesktopConfig(snapshot="blank", network=mode), pool="net-modes"
        )
        await run_blocking(desktop.start)
        try:
            started = desktop.network
            want = mode == "off"  # the opposite of the mode
            await run_blocking(lambda d=desktop, w=want: d.revert(needs_network=w))
            seen[mode] = (started, desktop.network, (await _probe(desktop, []))["routes"])
        finally:
            await run_blocking(desktop.close)
    assert seen["off"] == (False, False, 0), seen
    assert seen["on"][:2] == (True, True) and seen["on"][2] > 0, seen
