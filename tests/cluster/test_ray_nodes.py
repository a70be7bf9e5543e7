"""The Ray executor across two nodes, each in a network namespace of its own with its own
address (`netns`): the `agent-s3` CLI is the driver, run in the head's namespace and joining
by address, or from outside the cluster through Ray Client. A wide run spreads its rollouts over both nodes, whose desktops start on the
node that runs them; a `bench local` over both nodes is SIGKILLed mid-run and resumed; the
worker node is killed mid-rollout (every process in its namespace) and its rollout is
redone on the head node with nothing lost or duplicated in the run folder or the ledger."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_runs import AGENT, TASK, driver_command, rollout_headers
from netns import CLIENT_PORT, NetnsCluster, Node
from runner_helpers import sandboxes_under, solver_or_quitter, threaded_servers

from core.llm import Script
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration, pytest.mark.slow]

KEY = "sk-ray-nodes-test"




def _node_of(header: dict[str, Any], cluster: NetnsCluster) -> str:
    """The address of the node whose host lent the rollout's desktop (`local-1@HOST-ADDR`)."""
    label = str(header["environment"]).rpartition("@")[2]
    matches = [n.address for n in cluster.nodes if label.endswith(f"-{n.address}")]
    assert len(matches) == 1, f"environment {header['environment']!r} names no node of the cluster"
    return matches[0]


class DesktopWatch:
    """Records, while a run goes on, which node's namespace holds the processes of the
    desktops kept under each node's desktops folder."""

    def __init__(self, cluster: NetnsCluster) -> None:
        self.cluster = cluster
        self.seen: set[tuple[str, str]] = set()  # (folder's node, namespace's node)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> DesktopWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _watch(self) -> None:
        while not self._stop.wait(0.3):
            for owner in self.cluster.nodes:
                sandboxes = set(sandboxes_under(owner.env_dir / "desktops"))
                for inside in self.cluster.nodes:
                    if sandboxes & set(inside.pids()):
                        self.seen.add((owner.address, inside.address))


def test_a_wide_run_from_outside_the_cluster_spreads_over_both_nodes(ray_nodes: NetnsCluster, tmp_path: Path) -> None:
    """The driver runs in the host's namespace, on no node of the cluster, and joins through
    Ray Client (``ray://HEAD:10001``) as a laptop would."""
    cluster = ray_nodes
    env = {**cluster.env(cluster.head), "AGENT_S3_ENV_DIR": str(tmp_path / "driver-envs")}
    with DesktopWatch(cluster) as watch:
        done = subprocess.run(
            [str(AGENT), "run", "--task", TASK, "--model", "scripted/demo", "--executor", "ray", "--ray-address",
             f"ray://{cluster.head.address}:{CLIENT_PORT}", "--out", str(tmp_path / "runs"), "--run-id", "wide",
             "--rollouts", "2", "--settle", "0.2"],
            env=env, capture_output=True, text=True, timeout=150)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + cluster.log_tails()
    headers = rollout_headers(tmp_path / "runs" / "wide")
    assert sorted(headers) == [0, 1]
    assert all(h["status"] == "done" and h["score"] == 1.0 and h["attempts"] == 1 for h in headers.values())
    assert {_node_of(h, cluster) for h in headers.values()} == {n.address for n in cluster.nodes}
    # Each node's desktops ran inside that node's namespace, and only there; the driver's none.
    assert watch.seen == {(n.address, n.address) for n in cluster.nodes}
    assert not list((tmp_path / "driver-envs").glob("desktops/*"))
    selection = json.loads((tmp_path / "runs" / "wide" / TASK / "selection.json").read_text())
    assert selection["chosen"] in (0, 1)




@pytest.fixture
def bench_models(ray_nodes: NetnsCluster) -> Iterator[tuple[str, str]]:
    """The solver's (narrator's, judge's) and the quitter's servers, on the bridge's host
    end so the driver in the head's namespace reaches them."""
    replies = [solver_or_quitter(TASK, quitter=i == 1, quit_delay=2.0) for i in (0, 1)]
    servers = [OpenAIServer(Script(f"ray-nodes-{i}", [replies[i]] * 2000), api_key=KEY, host=ray_nodes.gateway)
               for i in (0, 1)]
    with threaded_servers(*servers) as (solver, quitter):
        yield solver, quitter


def test_bench_local_over_both_nodes_is_killed_and_resumed(ray_nodes: NetnsCluster, tmp_path: Path,
                                                           bench_models: tuple[str, str]) -> None:
    cluster = ray_nodes
    solver, quitter = bench_models
    mixture = tmp_path / "mixture.yaml"
    mixture.write_text(f"- {{model: openai/solver, base_url: '{solver}'}}\n"
                       f"- {{model: openai/quitter, base_url: '{quitter}'}}\n")
    command = cluster.head.command([
        str(AGENT), "bench", "local", "--task", TASK, "--mixture", str(mixture), "--model", "openai/solver",
        "--base-url", solver, "--judge", "bjudge", "--judge-model", "openai/judge", "--judge-base-url", solver,
        "--settle", "0.2", "--seed", "7", "--out", str(tmp_path / "runs"), "--run-id", "bench",
        "-c", "executor.kind=ray", "-c", f"executor.ray_address={cluster.ray_address}"])
    env = {**cluster.env(cluster.head), "OPENAI_API_KEY": KEY, "COLUMNS": "200"}
    run = tmp_path / "runs" / "bench"
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    before: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            headers = rollout_headers(run)
            if len(headers) == 2 and all(h["status"] == "running" and h["environment"] for h in headers.values()):
                before = headers
                break
            time.sleep(0.05)
        assert before, f"the run never had both rollouts running: {proc.stdout and proc.stdout.read()!r}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    assert {_node_of(h, cluster) for h in before.values()} == {n.address for n in cluster.nodes}

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=150)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    assert "resumed" in again.stdout
    headers = rollout_headers(run)
    assert [headers[k]["status"] for k in (0, 1)] == ["done", "failed"]
    assert [headers[k]["score"] for k in (0, 1)] == [1.0, 0.0]
    assert all(headers[k]["attempts"] == before[k]["attempts"] + 1 for k in (0, 1))
    assert all(_node_of(h, cluster) in {n.address for n in cluster.nodes} for h in headers.values())
    result = json.loads((run / TASK / "result.json").read_text())
    assert result["selected"] == 0 and result["selected_score"] == 1.0
    assert json.loads((run / "summary.json").read_text())["overall"]


def _steps(rollout: Path) -> list[dict[str, Any]]:
    path = rollout / "traj.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _kill_when_mid_rollout(cluster: NetnsCluster, node: Node, run: Path, proc: subprocess.Popen[str],
                           timeout: float = 90) -> tuple[int, float]:
    """SIGKILL every process of `node` once a rollout it lends a desktop to has taken a step;
    returns that rollout and the wall-clock time of the kill."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for k, header in rollout_headers(run).items():
            if (header["status"] == "running" and header["environment"]
                    and _node_of(header, cluster) == node.address and _steps(run / TASK / f"rollout-{k}")):
                node.kill()
                return k, time.time()
        time.sleep(0.05)
    raise AssertionError("no rollout ever ran a step on the worker node")


def test_a_killed_node_has_its_rollout_redone_on_the_other(ray_nodes: NetnsCluster, tmp_path: Path) -> None:
    cluster = ray_nodes
    head, worker = cluster.nodes
    run = tmp_path / "runs" / "lost"
    proc = subprocess.Popen(driver_command(cluster, tmp_path / "runs", "lost", "--rollouts", "2", "--settle", "1.0"),
                            env=cluster.env(cluster.head), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lost, killed_at = _kill_when_mid_rollout(cluster, worker, run, proc)
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, out[-2000:] + err[-2000:]
    assert worker.address not in cluster.alive_addresses()
    headers = rollout_headers(run)
    assert sorted(headers) == [0, 1]
    assert sorted(p.name for p in (run / TASK).glob("rollout-*")) == ["rollout-0", "rollout-1"]
    assert all(h["status"] == "done" and h["score"] == 1.0 for h in headers.values())
    assert headers[lost]["attempts"] == 2 and _node_of(headers[lost], cluster) == head.address
    assert headers[1 - lost]["attempts"] == 1
    # Nothing lost, nothing twice: each rollout's log is one attempt's steps 0..n-1 with
    # exactly their screenshots, each step's model calls are in the ledger exactly once,
    # the judge picked once.
    ledger = [json.loads(line) for line in (run / "ledger.jsonl").read_text().splitlines()]
    assert len({r["id"] for r in ledger}) == len(ledger)
    calls = Counter(r["tags"].get("call_id") for r in ledger)
    for k in (0, 1):
        steps = _steps(run / TASK / f"rollout-{k}")
        assert [s["index"] for s in steps] == list(range(len(steps))) and steps[-1]["action"]["kind"] == "done"
        assert headers[k]["step_count"] == len(steps)
        assert all(calls[c] == 1 for s in steps for c in s["call_ids"])
        shots = {s[side] for s in steps for side in ("before_screenshot", "after_screenshot") if s[side]}
        assert {p.name for p in (run / TASK / f"rollout-{k}").glob("*.png")} == shots
    assert [r["module"] for r in ledger].count("judge") == 1
    assert json.loads((run / TASK / "selection.json").read_text())["chosen"] in (0, 1)
    assert "errors: none" in out
    print(f"rollouts redone: 1; redone attempt started {headers[lost]['started_at'] - killed_at:.1f} s after the kill")


def test_a_driver_without_the_cluster_token_is_refused_in_one_line(ray_nodes: NetnsCluster, tmp_path: Path) -> None:
    cluster = ray_nodes
    env = {k: v for k, v in cluster.env(cluster.head).items() if not k.startswith("RAY_AUTH")}
    env["RAY_gcs_server_port_wait_time_s"] = "2"  # Ray's tries to reach the GCS: 2, not 10
    done = subprocess.run(driver_command(cluster, tmp_path / "runs", "no-token"), env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: the Ray cluster at") and "RAY_AUTH_TOKEN_PATH" in last
    assert not rollout_headers(tmp_path / "runs" / "no-token")
