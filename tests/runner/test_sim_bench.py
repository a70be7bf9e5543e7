"""The simulated fleet and models drive the real runner: ``agent-s3 bench local --env sim``
with simulated GPT-5 runs 6 of the local suite's tasks with 3 rollouts each on a fleet of 4
(small for CI: seconds of real time), narration while they run, a judge per task, the ledger, the metrics and the report, in seconds of real time
and hours of simulated time; everything it writes says SIMULATED; the same command again
resumes (keeps everything); a virtual clock refuses Ray, and on Ray's hosts the scaled
clock runs the same benchmark."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from core.llm import Ledger
from core.trajectory import RunLayout
from runner.cli import app

MODEL = "sim/openai/gpt-5-2025-08-07"
AGENT = Path(sys.executable).with_name("agent-s3")


TASKS, FLEET = 6, 4  # small enough for CI: seconds of real time


def _bench(out: Path, *extra: str, limit: int = TASKS) -> list[str]:
    return ["bench", "local", "--env", "sim", "--model", MODEL, "--rollouts", "3", "--parallel", str(limit),
            "--limit", str(limit), "--run-id", "sim", "--out", str(out), "-c", f"environment.fleet={FLEET}",
            "-c", "durable=false",
            "-c", f"environment.fleet_log={out / 'fleet.jsonl'}", "-c", "rollout.max_steps=100", *extra]


def test_a_simulated_benchmark_runs_the_real_runner_and_says_so(tmp_path: Path) -> None:
    began = time.perf_counter()
    ran = CliRunner().invoke(app, _bench(tmp_path), env={"COLUMNS": "200"})
    real = time.perf_counter() - began
    assert ran.exit_code == 0, ran.output
    assert "SIMULATED" in ran.output and "min+gain %" in ran.output

    layout = RunLayout(tmp_path, "sim")
    config = json.loads(layout.config_path.read_text())
    assert config["environment"]["kind"] == "sim" and "SIMULATED" in config["label"]
    headers = [h for per in layout.headers().values() for h in per.values() if h is not None]
    assert len(headers) == TASKS * 3
    assert all(h.label and "SIMULATED" in h.label and h.model == MODEL for h in headers)
    assert {h.status for h in headers} <= {"done", "failed", "step_limit", "environment_lost", "errored"}
    spans = [h.ended_at - h.started_at for h in headers if h.ended_at is not None]
    assert statistics.median(spans) > 120 and real < 120  # simulated minutes, a few real seconds

    summary = json.loads((layout.path / "summary.json").read_text())
    assert summary["comparability_note"].startswith("SIMULATED") and summary["leaderboard_comparable"] is False
    overall = summary["overall"]
    assert overall["tasks"] == TASKS and overall["mean_rollout"] <= overall["pass_at_n"]
    assert overall["min_gain"] >= overall["selected"] - 1e-9
    assert 'id="simulated"' in layout.report_path.read_text()

    records = Ledger.read(layout.ledger_path)
    modules = {r.module for r in records}
    assert {"policy", "reflection", "narrative", "judge"} <= modules
    assert all(r.dollars > 0 for r in records if r.error is None)  # priced as GPT-5
    judged = [json.loads((layout.task(t).path / "selection.json").read_text()) for t in layout.task_ids()]
    assert all(s["chosen"] is not None for s in judged)

    fleet = [json.loads(line) for line in (tmp_path / "fleet.jsonl").read_text().splitlines()]
    assert len(fleet) == 1 and fleet[0]["provider"] == "aws" and 1 <= fleet[0]["peak_lent"] <= FLEET
    assert fleet[0]["launches"] >= TASKS * 3  # every AWS revert is a new instance
    assert fleet[0]["machine_seconds"] > sum(spans) * 0.9 and fleet[0]["dollars"] > 0

    again = CliRunner().invoke(app, _bench(tmp_path), env={"COLUMNS": "200"})
    assert again.exit_code == 0, again.output
    assert "resuming" in again.output and f"{TASKS} tasks kept" in again.output
    assert len(Ledger.read(layout.ledger_path)) == len(records)  # nothing was asked again


def test_a_virtual_clock_refuses_ray_in_one_line(tmp_path: Path) -> None:
    ran = CliRunner().invoke(app, _bench(tmp_path, "-c", "executor.kind=ray"))
    assert ran.exit_code == 2
    assert "environment.clock=scaled" in ran.output


@pytest.mark.slow
@pytest.mark.timeout(200)
def test_a_scaled_clock_runs_the_simulation_on_rays_hosts(ray_cluster: None, tmp_path: Path) -> None:
    import ray

    address = ray.get_runtime_context().gcs_address
    command = [str(AGENT), *_bench(tmp_path, "-c", "environment.clock=scaled",
                                   "-c", "environment.speed=400", "-c", "rollout.max_steps=8",
                                   "-c", "executor.kind=ray", "-c", f"executor.ray_address={address}", limit=2)]
    command[command.index("--rollouts") + 1] = "2"
    ran = subprocess.run(command, capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    layout = RunLayout(tmp_path, "sim")
    headers = [h for per in layout.headers().values() for h in per.values() if h is not None]
    assert len(headers) == 4 and all("@" in (h.environment or "") for h in headers)  # lent by a Ray host
    assert all(h.ended_at is not None and h.ended_at - h.started_at > 20 for h in headers)  # simulated seconds
