"""``agent-s3 bench local`` with N=2 and Behavior Judge (narrator and judge scripted over
HTTP), once in process and once on the session's local Ray cluster: the Ray run is killed
with SIGKILL mid-run and the same command resumes it; both end with the same statuses,
scores, pick and result.json, and no desktop of the killed run is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from runner_helpers import sandboxes_under, solver_or_quitter, threaded_servers

from core.llm import Script
from core.trajectory import RunLayout
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.desktop, pytest.mark.integration, pytest.mark.slow]

KEY = "sk-ray-bench-test"
TASK = "mousepad-append-line"
AGENT = Path(sys.executable).with_name("agent-s3")




@pytest.fixture
def model_urls() -> Iterator[tuple[str, str]]:
    """The solver's (also narrator and judge) and the quitter's servers, on a thread of
    their own (the bench runs in a subprocess)."""
    replies = [solver_or_quitter(TASK, quitter=i == 1, quit_delay=1.0) for i in (0, 1)]
    servers = [OpenAIServer(Script(f"ray-bench-{i}", [replies[i]] * 2000), api_key=KEY) for i in (0, 1)]
    with threaded_servers(*servers) as (solver, quitter):
        yield solver, quitter


def _command(urls: tuple[str, str], out: Path, tmp: Path, *extra: str) -> list[str]:
    solver, quitter = urls
    mixture = tmp / "mixture.yaml"
    mixture.write_text(f"- {{model: openai/solver, base_url: '{solver}'}}\n"
                       f"- {{model: openai/quitter, base_url: '{quitter}'}}\n")
    return [str(AGENT), "bench", "local", "--task", TASK, "--mixture", str(mixture), "--model", "openai/solver",
            "--base-url", solver, "--judge", "bjudge", "--judge-model", "openai/judge", "--judge-base-url", solver,
            "--settle", "0.2", "--seed", "7", "--out", str(out), "--run-id", "bench", *extra]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": KEY, "AGENT_S3_ENV_DIR": str(tmp / "envs"), "COLUMNS": "200"}


def _headers(run: Path) -> dict[int, dict[str, Any]]:
    return {json.loads(p.read_text())["rollout"]: json.loads(p.read_text())
            for p in run.glob(f"{TASK}/rollout-*/rollout.json")}


def _outcome(out: Path) -> dict[str, Any]:
    layout = RunLayout(out, "bench")
    result, selection = layout.task(TASK).read_result(), layout.task(TASK).read_selection()
    assert result is not None and selection is not None
    headers = _headers(layout.path)
    return {
        "statuses": [headers[k]["status"] for k in sorted(headers)],
        "scores": [headers[k]["score"] for k in sorted(headers)],
        "models": [headers[k]["model"] for k in sorted(headers)],
        "result": json.loads((layout.task(TASK).path / "result.json").read_text()),
        "selection": (selection.chosen, selection.candidates, selection.strategy),
        "summary": json.loads((layout.path / "summary.json").read_text())["overall"],
    }


def _xvfb_under(base: Path) -> list[int]:
    return sandboxes_under(base)


@pytest.mark.timeout(150)
def test_bench_on_ray_killed_resumed_and_equal_to_asyncio(ray_cluster: None, tmp_path: Path,
                                                          model_urls: tuple[str, str]) -> None:
    import ray

    address = ray.get_runtime_context().gcs_address
    local = subprocess.run(_command(model_urls, tmp_path / "asyncio", tmp_path), env=_env(tmp_path / "a"),
                           capture_output=True, text=True, timeout=90)
    assert local.returncode == 0, local.stdout + local.stderr

    on_ray = _command(model_urls, tmp_path / "ray", tmp_path, "-c", "executor.kind=ray",
                      "-c", f"executor.ray_address={address}")
    run = tmp_path / "ray" / "bench"
    proc = subprocess.Popen(on_ray, env=_env(tmp_path / "r"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    before: dict[int, dict[str, Any]] = {}
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            headers = _headers(run)
            if any(h["status"] == "running" for h in headers.values()):
                before = headers
                break
            time.sleep(0.05)
        assert before, f"the Ray run never got mid-rollout: {proc.stdout and proc.stdout.read()}"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    again = subprocess.run(on_ray, env=_env(tmp_path / "r"), capture_output=True, text=True, timeout=90)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resumed" in again.stdout

    mine, theirs = _outcome(tmp_path / "ray"), _outcome(tmp_path / "asyncio")
    assert mine["statuses"] == ["done", "failed"] and mine["scores"] == [1.0, 0.0]
    assert mine["result"]["selected"] == 0 and mine["result"]["selected_score"] == 1.0
    assert mine == theirs  # statuses, scores, models, result.json, pick, metrics
    headers = _headers(run)
    interrupted = [k for k, h in before.items() if h["status"] == "running"]
    assert interrupted and all(headers[k]["attempts"] == before[k]["attempts"] + 1 for k in interrupted)
    assert all("@" in (h["environment"] or "") for h in headers.values())  # lent by the cluster's host
    assert ray.is_initialized() and ray.nodes()[0]["Alive"]  # the cluster outlived both runs
    deadline = time.monotonic() + 15
    while _xvfb_under(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not _xvfb_under(tmp_path)
