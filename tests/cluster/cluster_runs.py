"""What the two-node tests and `benchmarks/ray_nodes.py` share: the driver's command and a
reader of the rollouts a run has written so far."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from netns import NetnsCluster

__all__ = ["AGENT", "TASK", "driver_command", "rollout_headers"]

TASK = "mousepad-append-line"
AGENT = Path(sys.executable).with_name("agent-s3")


def driver_command(cluster: NetnsCluster, out: Path, run_id: str, *extra: str) -> list[str]:
    """`agent-s3 run` of the task with the scripted demo model on the cluster, in the head's namespace."""
    return cluster.head.command([str(AGENT), "run", "--task", TASK, "--model", "scripted/demo", "--executor", "ray",
                                 "--ray-address", cluster.ray_address, "--out", str(out), "--run-id", run_id, *extra])


def rollout_headers(run: Path) -> dict[int, dict[str, Any]]:
    """Each rollout's ``rollout.json`` by index; one being rewritten right now is left out."""
    found = {}
    for path in run.glob(f"{TASK}/rollout-*/rollout.json"):
        try:
            header = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found[header["rollout"]] = header
    return found
