"""The Ray executor on one node vs two, and what losing a node costs.

A Ray cluster of two nodes is built on this machine, each node in a network namespace of
its own with its own address (`tests/cluster/netns.py`; needs root). The driver is the
`agent-s3` CLI in the head's namespace, running the local suite's ``mousepad-append-line``
as a wide run of `--rollouts` rollouts with the scripted demo models, three times:

- ``one_node_s`` / ``two_nodes_s``: wall time of the command with ``executor.max_hosts=1``
  and with both nodes, side by side as ``two_over_one`` (both nodes share this machine's
  cores, so expect ≈ 1 here; on separate machines each node brings its own);
- ``rollouts_per_node``: where the two-node run's rollouts ran (from their headers);
- the same run with the worker node SIGKILLed (every process of its namespace) once one of
  its rollouts has taken a step: ``redone`` rollouts, ``recover_s`` from the kill to the
  last redone attempt's start, ``redone_done_s`` to its end, ``lost_run_s`` the run's wall
  time, and whether every rollout still ended done (``all_done``).

    python benchmarks/ray_nodes.py [--rollouts 4] [--settle 1.0] [--ray-health-checks]

The cluster shortens Ray's node health checks (a dead node is declared so in about 4 s, not
about 30 s); ``--ray-health-checks`` keeps Ray's defaults.

Prints ``name: value`` lines. The machine is shared: compare ratios, not absolutes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "cluster"))

from cluster_runs import TASK, driver_command, rollout_headers
from netns import NetnsCluster, netns_missing, two_node_cluster


def _command(cluster: NetnsCluster, out: Path, run_id: str, rollouts: int, settle: float, *extra: str) -> list[str]:
    return driver_command(cluster, out, run_id, "--rollouts", str(rollouts), "--settle", str(settle), *extra)


def _node(cluster: NetnsCluster, header: dict[str, Any]) -> str:
    label = str(header.get("environment") or "").rpartition("@")[2]
    return next((n.address for n in cluster.nodes if label.endswith(n.address)), label or "?")


def _timed(cluster: NetnsCluster, argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=cluster.env(cluster.head), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {(done.stdout + done.stderr)[-1500:]}")
    return time.perf_counter() - started


def _with_a_node_killed(cluster: NetnsCluster, out: Path, rollouts: int, settle: float) -> dict[str, Any]:
    worker = cluster.nodes[1]
    run = out / "lost"
    started = time.perf_counter()
    proc = subprocess.Popen(_command(cluster, out, "lost", rollouts, settle), env=cluster.env(cluster.head),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed_at: float | None = None
    while proc.poll() is None and killed_at is None:
        for k, header in rollout_headers(run).items():
            log = run / TASK / f"rollout-{k}" / "traj.jsonl"
            if header["status"] == "running" and _node(cluster, header) == worker.address \
                    and log.exists() and log.stat().st_size:
                worker.kill()
                killed_at = time.time()
                break
        time.sleep(0.05)
    proc.communicate(timeout=900)
    wall = time.perf_counter() - started
    if killed_at is None:
        raise SystemExit("the worker node ran no rollout step; nothing was killed")
    headers = rollout_headers(run)
    redone = [h for h in headers.values() if h["attempts"] > 1]
    return {
        "exit_code": proc.returncode,
        "redone": len(redone),
        "recover_s": max((h["started_at"] - killed_at for h in redone), default=float("nan")),
        "redone_done_s": max(((h["ended_at"] or killed_at) - killed_at for h in redone), default=float("nan")),
        "lost_run_s": wall,
        "all_done": len(headers) == rollouts and all(h["status"] == "done" for h in headers.values()),
        "redone_on": ",".join(sorted({_node(cluster, h) for h in redone})),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=4)
    parser.add_argument("--settle", type=float, default=1.0)
    parser.add_argument("--ray-health-checks", action="store_true", help="keep Ray's default node health checks")
    args = parser.parse_args()
    reason = netns_missing()
    if reason is not None:
        raise SystemExit(reason)
    with tempfile.TemporaryDirectory(prefix="ray-nodes-") as tmp, two_node_cluster(
            Path(tmp), fast_health=not args.ray_health_checks) as cluster:
        out = Path(tmp) / "runs"
        one = _timed(cluster, _command(cluster, out, "one", args.rollouts, args.settle, "-c", "executor.max_hosts=1"))
        two = _timed(cluster, _command(cluster, out, "two", args.rollouts, args.settle))
        per_node = Counter(_node(cluster, h) for h in rollout_headers(out / "two").values())
        print(f"rollouts: {args.rollouts}")
        print(f"one_node_s: {one:.1f}")
        print(f"two_nodes_s: {two:.1f}")
        print(f"two_over_one: {two / one:.2f}")
        print(f"rollouts_per_node: {', '.join(f'{a}={n}' for a, n in sorted(per_node.items()))}")
        for name, value in _with_a_node_killed(cluster, out, args.rollouts, args.settle).items():
            print(f"{name}: {value:.1f}" if isinstance(value, float) else f"{name}: {value}")


if __name__ == "__main__":
    main()
