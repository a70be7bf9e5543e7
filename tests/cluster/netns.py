"""A real Ray cluster of several nodes on this one machine, each node in a network
namespace of its own with its own address, and guaranteed teardown.

The namespaces hang off one bridge in the host's namespace (``<subnet>.254``), which also
gives each namespace a default route: Ray finds a node's own address by routing towards
the outside, and a namespace without a route would make it fall back to loopback. Nodes
run `ray start` (head: ``--head --port``; the others: ``--address HEAD:PORT``) with their
own ``AGENT_S3_ENV_DIR``, so their desktops live in separate folders as on separate
machines. Every node and every driver authenticates with the cluster's own token (Ray's
token auth, ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH``), as a cluster across real
machines should; `ray start --head` turns token auth on by itself when ``~/.ray/auth_token``
exists, and the other nodes would then be refused. Teardown kills exactly the processes inside the namespaces (never `ray stop`,
which kills every Ray process on the machine, other clusters' too), then deletes the
namespaces and the bridge.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CLIENT_PORT", "HEAD_PORT", "NetnsCluster", "Node", "free_subnet", "netns_missing", "two_node_cluster"]

#: The head's GCS port: the one address every other node and driver on a node is given.
HEAD_PORT = 6379
#: The head's Ray Client port, for drivers on no node of the cluster (``ray://HEAD:10001``).
CLIENT_PORT = 10001
RAY = Path(sys.executable).with_name("ray")
#: Ray's node health checks, fast enough that a killed node is declared dead in seconds
#: (the defaults take about half a minute); read by the head's GCS from its environment.
FAST_HEALTH = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_timeout_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}


def netns_missing() -> str | None:
    """None when this machine can build the cluster, else the one-line reason it cannot."""
    if os.geteuid() != 0:
        return "a cluster in network namespaces needs root (ip netns add)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing: apt-get install iproute2"
    if not RAY.exists():
        return f"Ray's `ray` command is not installed beside {sys.executable}"
    probe = f"as3-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if made.returncode != 0:  # root without CAP_SYS_ADMIN / CAP_NET_ADMIN, as in many containers
        return f"cannot create a network namespace here: {made.stderr.strip()[:200]}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def free_subnet() -> str:
    """A ``10.77.N`` /24 no interface of this machine uses yet (N from 0 up), so clusters of
    concurrent test sessions do not share addresses."""
    out = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True, timeout=30).stdout
    used = {word.rsplit(".", 1)[0] for word in out.split() if word.startswith("10.77.")}
    for n in range(255):
        if f"10.77.{n}" not in used:
            return f"10.77.{n}"
    raise RuntimeError("every 10.77.N/24 subnet is in use on this machine")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


@dataclass
class Node:
    """One Ray node: its namespace, its address and its desktops' folder."""

    netns: str
    address: str
    env_dir: Path
    head: bool

    def pids(self) -> list[int]:
        """Every process inside this node's network namespace."""
        out = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True, timeout=30)
        return [int(p) for p in out.stdout.split() if p.isdigit()]

    def kill(self, timeout: float = 20.0) -> int:
        """SIGKILL every process of the node, as a machine losing power would; returns how
        many were killed."""
        killed: set[int] = set()
        deadline = time.monotonic() + timeout
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
            time.sleep(0.1)
        if self.pids():
            raise RuntimeError(f"processes of {self.netns} survived SIGKILL: {self.pids()}")
        return len(killed)

    def command(self, argv: Sequence[str]) -> list[str]:
        """`argv` run inside this node's namespace."""
        return ["ip", "netns", "exec", self.netns, *argv]


@dataclass
class NetnsCluster:
    """The namespaces, bridge and Ray nodes of one cluster (see `two_node_cluster`)."""

    root: Path
    subnet: str
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])
    nodes: list[Node] = field(default_factory=list)
    #: Shorten Ray's node health checks (`FAST_HEALTH`); False keeps Ray's defaults.
    fast_health: bool = True
    #: Ray's session folder: short, since Ray's socket paths must fit in 107 bytes.
    ray_dir: Path | None = None

    @property
    def bridge(self) -> str:
        return f"as3br{self.tag}"

    @property
    def gateway(self) -> str:
        """The host namespace's address on the bridge (reachable from every node)."""
        return f"{self.subnet}.254"

    @property
    def head(self) -> Node:
        return self.nodes[0]

    @property
    def ray_address(self) -> str:
        return f"{self.head.address}:{HEAD_PORT}"

    @property
    def token_path(self) -> Path:
        """The cluster's authentication token (root-only file)."""
        return self.root / "auth_token"

    def env(self, node: Node) -> dict[str, str]:
        """The environment of processes started on `node`: the cluster's token, this node's
        desktops folder, no API keys of the host."""
        env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("RAY_")}
        env.update(FAST_HEALTH if self.fast_health else {}, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token",
                   RAY_AUTH_TOKEN_PATH=str(self.token_path), AGENT_S3_ENV_DIR=str(node.env_dir))
        return env

    # -- building -----------------------------------------------------------------------

    def add_namespaces(self, count: int) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.token_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        self.ray_dir = Path(tempfile.mkdtemp(prefix="as3ray-", dir="/tmp"))
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{self.gateway}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i in range(count):
            netns, host_end, node_end = f"as3-{self.tag}-{i}", f"as3v{self.tag}{i}", f"as3n{self.tag}{i}"
            node = Node(netns, f"{self.subnet}.{i + 1}", self.root / f"node-{i}", head=i == 0)
            _ip("netns", "add", netns)
            self.nodes.append(node)
            _ip("link", "add", host_end, "type", "veth", "peer", "name", node_end)
            _ip("link", "set", node_end, "netns", netns)
            _ip("link", "set", host_end, "master", self.bridge, "up")
            _ip("-n", netns, "addr", "add", f"{node.address}/24", "dev", node_end)
            _ip("-n", netns, "link", "set", node_end, "up")
            _ip("-n", netns, "link", "set", "lo", "up")
            _ip("-n", netns, "route", "add", "default", "via", self.gateway)

    def start_ray(self, node: Node) -> None:
        """`ray start` on the node (the head first); waits until it has joined."""
        node.env_dir.mkdir(parents=True, exist_ok=True)
        common = ["--node-ip-address", node.address, "--num-cpus", "1", "--object-store-memory", str(100 * 2**20),
                  "--disable-usage-stats"]
        if node.head:
            argv = [str(RAY), "start", "--head", "--port", str(HEAD_PORT), "--ray-client-server-port", str(CLIENT_PORT),
                    "--include-dashboard=false",
                    "--temp-dir", str(self.ray_dir), *common]
        else:
            argv = [str(RAY), "start", "--address", self.ray_address, *common]
        done = subprocess.run(node.command(argv), env=self.env(node), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"ray start on {node.netns} failed: {(done.stdout + done.stderr)[-1500:]}")

    def alive_addresses(self) -> set[str]:
        """The addresses of the nodes the head's GCS counts alive (asked from the head's
        namespace, through Ray's own state API)."""
        probe = ("import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False); "
                 "print(' '.join(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))")
        done = subprocess.run(self.head.command([sys.executable, "-c", probe, self.ray_address]),
                              env=self.env(self.head), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"cannot ask the head for its nodes: {done.stderr[-1500:]}")
        return set(done.stdout.split())

    def log_tails(self, pattern: str = "ray_client_server*", lines: int = 15) -> str:
        """The last lines of the head session's Ray logs named like ``pattern``, for a failing
        test's message (the folder is gone after teardown)."""
        if self.ray_dir is None:
            return ""
        parts = []
        for log in sorted(self.ray_dir.glob(f"session_2*/logs/{pattern}")):  # not session_latest too
            with suppress(OSError):
                tail = log.read_text(errors="replace").splitlines()[-lines:]
                if tail:
                    parts.append(f"--- {log.name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def restart(self, node: Node) -> None:
        """Start a killed node's Ray again (a machine that came back)."""
        node.kill()
        self.start_ray(node)

    def teardown(self) -> None:
        """Kill every process in the namespaces (workers first, the head last), delete the
        namespaces and the bridge; never raises half-way."""
        problems: list[str] = []
        for node in reversed(self.nodes):
            try:
                node.kill()
            except Exception as e:
                problems.append(str(e))
            with suppress(subprocess.CalledProcessError):
                _ip("netns", "del", node.netns)
        with suppress(subprocess.CalledProcessError):
            _ip("link", "del", self.bridge)
        if self.ray_dir is not None and not problems:
            shutil.rmtree(self.ray_dir, ignore_errors=True)
        if problems:
            raise RuntimeError("; ".join(problems))


def existing_namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return {line.split()[0] for line in out.stdout.splitlines() if line.strip()}


@contextmanager
def two_node_cluster(root: Path, *, nodes: int = 2, subnet: str | None = None,
                     fast_health: bool = True) -> Iterator[NetnsCluster]:
    """A Ray cluster of `nodes` nodes (2 by default) in namespaces ``<subnet>.1``, ``.2``,
    ... (the first free ``10.77.N`` unless given); the head is node 0. Everything is torn
    down on the way out, errors included."""
    cluster = NetnsCluster(root, subnet or free_subnet(), fast_health=fast_health)
    try:
        cluster.add_namespaces(nodes)
        for node in cluster.nodes:
            cluster.start_ray(node)
        wanted = {n.address for n in cluster.nodes}
        deadline = time.monotonic() + 60
        while (alive := cluster.alive_addresses()) != wanted:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the cluster's alive nodes are {sorted(alive)}, not {sorted(wanted)}")
            time.sleep(1)
        yield cluster
    finally:
        cluster.teardown()


def main() -> None:
    """``python tests/cluster/netns.py [NODES]``: hold a cluster up until Ctrl-C, printing
    how to drive it."""
    reason = netns_missing()
    if reason is not None:
        raise SystemExit(reason)
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    with tempfile.TemporaryDirectory(prefix="ray-netns-") as tmp, two_node_cluster(Path(tmp), nodes=nodes) as cluster:
        env = cluster.env(cluster.head)
        print(f"nodes: {', '.join(f'{n.address} ({n.netns})' for n in cluster.nodes)}")
        print(f"export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH={env['RAY_AUTH_TOKEN_PATH']}")
        print(f"on the head: ip netns exec {cluster.head.netns} agent-s3 run ... --ray-address {cluster.ray_address}")
        print(f"from here:   agent-s3 run ... --ray-address ray://{cluster.head.address}:{CLIENT_PORT}")
        print("Ctrl-C tears it down", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the teardown short
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
