"""``agent-s3 bench local`` end to end on real desktops, every model over HTTP: two suite
tasks with N=2 and a scripted narrator and judge; the bench process is killed with SIGKILL
mid-run and the same command run again completes the run with no rollout, narrative or
verdict lost or duplicated, a finished rollout kept as it was, and every JSON file parsing.
A command with other settings is refused in one line; the metrics and the OSWorld export
come out of the finished run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from runner_helpers import desktops_missing, threaded_servers

from bjudge import import_osworld
from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RunLayout
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import DEMO_PLANS, role_of
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

KEY = "sk-bench-test"
TASKS = {"mousepad-append-line": "groceries.txt", "terminal-make-dirs": "~/projects/alpha"}
AGENT = Path(sys.executable).with_name("agent-s3")


def _reply(request: ScriptRequest) -> str | Reply:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    text = "\n".join(m.text() for m in request.messages)
    if system.startswith("You describe what a single computer action") or "===== Candidate" in text:
        return demo_judge_reply(request)
    if role_of(request.messages) in ("grounding", "reflection", "code_agent", "code_summary"):
        return DEMO_PLANS["mousepad-append-line"](request)  # these replies do not depend on the task
    for task_id, marker in TASKS.items():
        if marker in text:
            return Reply(text=str(DEMO_PLANS[task_id](request)), delay=0.25)  # slow enough to be killed mid-run
    return "I cannot tell what is asked."


@pytest.fixture
def model_url() -> Iterator[str]:
    """Policy, narrator and judge on one server, on a thread of its own (the bench runs in
    a subprocess), kept up across the killed run and its resumption."""
    with threaded_servers(OpenAIServer(Script("bench-models", [_reply] * 2000), api_key=KEY)) as (url,):
        yield url


def _command(url: str, out: Path, *extra: str) -> list[str]:
    tasks = [a for t in TASKS for a in ("--task", t)]
    return [str(AGENT), "bench", "local", *tasks, "--rollouts", "2", "--model", "openai/policy", "--base-url", url,
            "--judge-model", "openai/judge", "--judge-base-url", url, "--settle", "0.2", "--seed", "11",
            "--out", str(out), "--run-id", "bench-kill", *extra]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": KEY, "AGENT_S3_ENV_DIR": str(tmp / "envs"), "COLUMNS": "200"}


def _headers(run: Path) -> dict[tuple[str, int], dict]:
    out = {}
    for path in run.glob("*/rollout-*/rollout.json"):
        data = json.loads(path.read_text())
        out[(data["task_id"], data["rollout"])] = data
    return out


@pytest.mark.timeout(240)
def test_bench_local_killed_and_resumed(tmp_path: Path, model_url: str) -> None:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    out, run = tmp_path / "runs", tmp_path / "runs" / "bench-kill"
    proc = subprocess.Popen(_command(model_url, out), env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 150
    before_kill: dict[tuple[str, int], dict] = {}
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            headers = _headers(run)
            scored = [h for h in headers.values() if h["status"] == "done" and h.get("score") is not None]
            if scored and any(h["status"] == "running" for h in headers.values()):
                before_kill = headers
                break
            time.sleep(0.1)
        assert before_kill, f"never saw a finished and a running rollout at once; output: {proc.stdout and proc.stdout.read()}"
        proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
    finally:
        proc.wait(30)
    interrupted = [key for key, h in before_kill.items() if h["status"] == "running"]
    kept = {key: h for key, h in before_kill.items() if h["status"] == "done" and h.get("score") is not None}
    assert kept and interrupted

    again = subprocess.run(_command(model_url, out), env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resumed" in again.stdout

    headers = _headers(run)
    assert sorted(headers) == sorted((t, k) for t in TASKS for k in range(2))  # none lost, none extra
    assert all(h["status"] in ("done", "failed") for h in headers.values())
    for key, h in kept.items():  # finished before the kill: kept exactly as it was
        assert (h["started_at"], h["attempts"], h["score"]) == (headers[key]["started_at"], headers[key]["attempts"],
                                                                 headers[key]["score"])
    for key in interrupted:  # redone from the snapshot
        assert headers[key]["attempts"] == before_kill[key]["attempts"] + 1
    layout = RunLayout(out, "bench-kill")
    for task_id in TASKS:
        task_dir = layout.task(task_id)
        result, selection = task_dir.read_result(), task_dir.read_selection()
        assert result is not None and sorted(result.scores) == [0, 1] and result.pass_at_n == 1.0
        assert selection is not None and selection.chosen is not None and result.selected_score == 1.0
        assert sorted(p.name for p in task_dir.narratives_path.iterdir()) == ["rollout-0.json", "rollout-1.json"]
        for k in range(2):
            narrative = task_dir.read_narrative(k)
            assert narrative is not None and len(narrative.facts) == headers[(task_id, k)]["step_count"]
    for path in run.rglob("*.json"):
        json.loads(path.read_text())  # every JSON file parses
    assert not [p for p in run.rglob("*") if ".tmp" in p.name]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["overall"]["tasks"] == 2 and summary["overall"]["selected"] == 1.0
    assert summary["overall"]["pass_at_n"] == 1.0 and summary["modules"]["policy"]["calls"] > 0
    assert "overall" in again.stdout and "pass@2" in again.stdout
    # Kept rollouts are told again from the fact cache: narrative calls after the kill are
    # for the redone rollouts' steps at most (control actions such as DONE need no call).
    redone_steps = sum(1 for key, h in headers.items() if key not in kept
                       for step in layout.rollout(*key).iter_steps()
                       if (step.action or {}).get("kind") not in ("done", "fail", "wait"))
    after = [r for r in Ledger.read(layout.ledger_path) if r.started_at >= killed_at and r.module == "narrative"]
    assert 0 < len(after) <= redone_steps
    judge_calls = [r for r in Ledger.read(layout.ledger_path) if r.module == "judge"]
    assert {r.tags.get("task") for r in judge_calls} <= set(TASKS)

    # Another N for the same run id is refused before any desktop starts.
    other = subprocess.run([a if a != "2" else "3" for a in _command(model_url, out)], env=_env(tmp_path),
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 2
    assert "other settings" in other.stderr and "wide.rollouts (was 2, now 3)" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1

    # The export round-trips through bjudge's OSWorld import.
    exported = tmp_path / "osworld-results"
    ex = subprocess.run([str(AGENT), "bench", "export", str(run), str(exported)], env=_env(tmp_path),
                        capture_output=True, text=True, timeout=60)
    assert ex.returncode == 0 and "exported 2 tasks" in ex.stdout, ex.stdout + ex.stderr
    back = RunLayout(tmp_path / "back", "imported", durable=False)
    report = import_osworld([exported], back)
    assert sorted(report.rollouts) == sorted(TASKS) and not report.skipped
    for task_id in TASKS:
        chosen = layout.task(task_id).read_selection()
        assert chosen is not None
        original = layout.rollout(task_id, chosen.chosen).read()
        copy = back.rollout(task_id, 0).read()
        assert copy.info.score == original.info.score == 1.0
        assert copy.info.status == original.info.status
        assert len(copy.steps) == len(original.steps)
