"""Fixtures of the cluster tests: one Ray cluster of two nodes, each in a network namespace
of its own (`netns`), shared by a module's tests and torn down after them with nothing
left behind. The runner's test helpers (desktops, live processes, threaded model servers)
come from tests/runner."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

RUNNER_TESTS = Path(__file__).resolve().parents[1] / "runner"
if str(RUNNER_TESTS) not in sys.path:
    sys.path.append(str(RUNNER_TESTS))

from netns import NetnsCluster, existing_namespaces, netns_missing, two_node_cluster  # noqa: E402
from runner_helpers import desktops_missing, live_commands  # noqa: E402


@pytest.fixture(scope="module")
def ray_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NetnsCluster]:
    """Two Ray nodes (head 10.77.N.1, worker 10.77.N.2, the first free N) on a bridge whose
    host end is 10.77.N.254; afterwards no namespace, bridge or process of the cluster is left."""
    reason = netns_missing() or desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("ray-nodes")
    with two_node_cluster(root) as cluster:
        names = [n.netns for n in cluster.nodes]
        marks = [str(root), str(cluster.ray_dir)]
        yield cluster
    assert not set(names) & existing_namespaces()
    deadline = time.monotonic() + 20
    while (left := [pid for pid, cmd in live_commands().items() if any(m in cmd for m in marks)]) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not left, f"processes of the cluster left behind: {left}"
