"""`agent-s3 bench local` on real desktops (N=3, Behavior Judge) under model faults and
repeated SIGKILLs, with distinctive fake API keys and AWS credentials set.

One seeded run proves: 20% of model calls fail (429 with and without Retry-After, 500, 503,
a timeout, a dropped connection, a malformed body, served over HTTP through the official
SDK) and no run crashes, every rollout ends done, failed or errored with its reason, and the
ledger counts one retry per injected fault; the runner killed at seeded random moments and
run again completes with no rollout, narrative or verdict lost or duplicated; every JSON and
JSONL file parses whole and no temporary file is left; no file holds a secret."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from chaos_helpers import Figures, scale
from runner_helpers import desktops_missing, threaded_servers

from core.llm import Ledger, Reply, Script, ScriptRequest
from core.trajectory import RunLayout
from runner.demo_judge import demo_judge_reply
from runner.demo_policy import DEMO_PLANS, role_of
from testing.llm import OpenAIServer

pytestmark = [pytest.mark.chaos, pytest.mark.desktop, pytest.mark.integration]

SEED = 20261122
KEY = "sk-chaos-OPENAI-5d1e9b7c3a"
SECRETS = {
    "OPENAI_API_KEY": KEY,
    "ANTHROPIC_API_KEY": "sk-ant-chaos-ANTHROPIC-8c2f4e6a1b",
    "AWS_ACCESS_KEY_ID": "AKIACHAOSFAKE7Q2W9E4R",
    "AWS_SECRET_ACCESS_KEY": "chaosFakeSecretKey/3n8Vb1Xz7Lp0Qw5Ty2Ui9Oa4Sd6Fg",
    "AWS_SESSION_TOKEN": "chaosFakeSessionToken-9a8b7c6d5e4f",
}
TASKS = {"mousepad-append-line": "groceries.txt", "terminal-make-dirs": "~/projects/alpha"}
ROLLOUTS = 3
TIMEOUT = 5.0
AGENT = Path(sys.executable).with_name("agent-s3")


def _answer(request: ScriptRequest) -> str | Reply:
    system = next((m.text() for m in request.messages if m.role == "system"), "")
    text = "\n".join(m.text() for m in request.messages)
    if system.startswith("You describe what a single computer action") or "===== Candidate" in text:
        return demo_judge_reply(request)
    if role_of(request.messages) in ("grounding", "reflection", "code_agent", "code_summary"):
        return DEMO_PLANS["mousepad-append-line"](request)
    for task_id, marker in TASKS.items():
        if marker in text:
            return Reply(text=str(DEMO_PLANS[task_id](request)), delay=0.1)
    return "I cannot tell what is asked."


FAULTS: dict[str, Reply] = {
    "429-retry-after": Reply(error=429, retry_after=0.05, message="slow down"),
    "429-no-retry-after": Reply(error=429, message="slow down"),
    "500": Reply(error=500, message="internal error"),
    "503": Reply(error=503, message="overloaded"),
    "timeout": Reply(text="too late", delay=TIMEOUT + 1.0),
    "drop": Reply(fault="drop"),
    "malformed": Reply(fault="malformed"),
}


@dataclass
class FaultyModels:
    """Answers like the demo models, but a seeded 20% of calls get one of the faults."""

    rate: float
    rng: random.Random
    injected: list[tuple[float, str]] = field(default_factory=list)
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: ScriptRequest) -> str | Reply:
        with self.lock:
            self.calls += 1
            if self.rng.random() < self.rate:
                kind = sorted(FAULTS)[len(self.injected) % len(FAULTS)]  # every kind in turn
                self.injected.append((time.time(), kind))
                return FAULTS[kind]
        return _answer(request)


@pytest.fixture
def faulty() -> FaultyModels:
    return FaultyModels(0.2, random.Random(SEED))


@pytest.fixture
def model_url(faulty: FaultyModels) -> Iterator[str]:
    """The models' server on its own loop thread, up across the killed runs and the resume."""
    with threaded_servers(OpenAIServer(Script("chaos-models", [faulty] * 20000), api_key=KEY)) as (url,):
        yield url


def _command(url: str, out: Path) -> list[str]:
    tasks = [a for t in TASKS for a in ("--task", t)]
    return [str(AGENT), "bench", "local", *tasks, "--rollouts", str(ROLLOUTS), "--model", "openai/policy",
            "--base-url", url, "--judge-model", "openai/judge", "--judge-base-url", url, "--settle", "0.2",
            "--seed", "5", "--out", str(out), "--run-id", "chaos", "-c", f"policy.timeout={TIMEOUT}",
            "-c", f"wide.judge_model.timeout={TIMEOUT}", "-c", "wide.max_retries=2"]


def _env(tmp: Path) -> dict[str, str]:
    return {**os.environ, **SECRETS, "AGENT_S3_ENV_DIR": str(tmp / "envs"), "COLUMNS": "200"}


def _steps_on_disk(run: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in run.glob("*/rollout-*/traj.jsonl"))


def torn_files(root: Path) -> list[str]:
    """JSON files that do not parse, JSONL lines that do not, and temporary files left."""
    bad = []
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        if ".tmp" in path.name or (path.name.startswith(".") and "tmp" in path.name):
            bad.append(f"temporary {path}")
        elif path.suffix == ".json":
            try:
                json.loads(path.read_text())
            except ValueError:
                bad.append(f"torn {path}")
        elif path.suffix == ".jsonl":
            for number, line in enumerate(path.read_text().splitlines(), 1):
                try:
                    json.loads(line)
                except ValueError:
                    bad.append(f"torn {path}:{number}")
    return bad


def _files_of(root: Path) -> Iterator[Path]:
    """Every file under ``root``, skipping folders that vanish during the walk: a killed
    run's desktops are being removed by their watchdogs meanwhile."""
    for folder, _dirs, names in os.walk(root):
        for name in names:
            yield Path(folder, name)


def files_with_secrets(*roots: Path) -> list[str]:
    found = []
    values = [v.encode() for v in SECRETS.values()]
    for root in roots:
        for path in _files_of(root):
            if path.is_file() and not path.is_symlink():
                try:
                    data = path.read_bytes()
                except OSError:
                    continue
                found += [f"{path}" for v in values if v in data]
    return found


@pytest.mark.timeout(300)
def test_bench_survives_model_faults_kills_and_keeps_secrets(
        tmp_path: Path, model_url: str, faulty: FaultyModels, figures: Figures) -> None:
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    out, run, logs = tmp_path / "runs", tmp_path / "runs" / "chaos", tmp_path / "logs"
    logs.mkdir()
    rng = random.Random(SEED + 1)
    kills, landed = 3 * scale(), 0
    leaked_mid_run: list[str] = []
    for attempt in range(kills):
        target = _steps_on_disk(run) + rng.randint(1, 3)  # a seeded random point: after that many more steps
        with (logs / f"killed-{attempt}.log").open("wb") as sink:
            proc = subprocess.Popen(_command(model_url, out), env=_env(tmp_path), stdout=sink,
                                    stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 120
            while proc.poll() is None and _steps_on_disk(run) < target and time.monotonic() < deadline:
                time.sleep(0.02)
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                landed += 1
            proc.wait(30)
        assert not [b for b in torn_files(run) if b.startswith("torn")]  # right after a kill too
        leaked_mid_run += files_with_secrets(run, tmp_path / "envs", logs)  # killed runs' desktops too
    resumed_at = time.time()
    with (logs / "resumed.log").open("wb") as sink:
        final = subprocess.run(_command(model_url, out), env=_env(tmp_path), stdout=sink, stderr=subprocess.STDOUT,
                               timeout=240)
    output = (logs / "resumed.log").read_text()
    assert final.returncode == 0, output

    layout = RunLayout(out, "chaos")
    headers = {}
    for path in run.glob("*/rollout-*/rollout.json"):
        data = json.loads(path.read_text())
        headers[(data["task_id"], data["rollout"])] = data
    expected = sorted((t, k) for t in TASKS for k in range(ROLLOUTS))
    lost = len(set(expected) - set(headers))
    duplicated = len(list(run.glob("*/rollout-*"))) - len(expected)
    unfinished = [k for k, h in headers.items() if h["status"] not in ("done", "failed", "errored")]
    errored_without_reason = [k for k, h in headers.items() if h["status"] == "errored" and not h.get("reason")]
    narratives = verdicts = 0
    narrative_gaps = []
    for task_id in TASKS:
        task_dir = layout.task(task_id)
        names = sorted(p.name for p in task_dir.narratives_path.iterdir())
        narratives += len(names)
        for k in range(ROLLOUTS):
            steps = [s.index for s in layout.rollout(task_id, k).iter_steps()]
            assert steps == list(range(len(steps))), f"{task_id}/{k} steps {steps}"  # none lost or repeated
            narrative = task_dir.read_narrative(k)
            if headers[(task_id, k)]["status"] != "errored" and (
                    narrative is None or len(narrative.facts) != headers[(task_id, k)]["step_count"]):
                narrative_gaps.append((task_id, k))
        selection = task_dir.read_selection()
        verdicts += int(selection is not None and task_dir.read_result() is not None)
    bad_files = torn_files(run)
    leaked = files_with_secrets(run, tmp_path / "envs", logs) + leaked_mid_run

    records = Ledger.read(layout.ledger_path)
    final_faults = [kind for at, kind in faulty.injected if at >= resumed_at]
    final_retries = sum(r.retries for r in records if r.started_at >= resumed_at)
    exhausted = [r for r in records if r.error]
    figures("model_calls", faulty.calls)
    figures("faults_injected", len(faulty.injected))
    figures("faults_by_kind", ",".join(f"{k}={sum(1 for _, x in faulty.injected if x == k)}" for k in sorted(FAULTS)))
    figures("retries_counted", sum(r.retries for r in records))
    figures("faults_injected_last_run", len(final_faults))
    figures("retries_counted_last_run", final_retries)
    figures("calls_failed_after_retries", len(exhausted))
    figures("crashed_runs", int(final.returncode != 0))
    figures("rollouts_errored", sum(1 for h in headers.values() if h["status"] == "errored"))
    figures("rollouts_errored_without_reason", len(errored_without_reason))
    figures("runner_kills", landed)
    figures("rollouts_lost", lost)
    figures("rollouts_duplicated", duplicated)
    figures("narratives", f"{narratives}/{sum(1 for h in headers.values() if h['status'] != 'errored')}")
    figures("narratives_missing_or_partial", len(narrative_gaps))
    figures("verdicts", f"{verdicts}/{len(TASKS)}")
    figures("torn_or_temporary_files", len(bad_files))
    figures("files_with_secrets", len(leaked))

    assert {k for _, k in faulty.injected} == set(FAULTS)
    assert landed == kills
    assert lost == 0 and duplicated == 0 and not unfinished and not errored_without_reason
    finished = sum(1 for h in headers.values() if h["status"] != "errored")
    assert narratives == finished and not narrative_gaps and verdicts == len(TASKS), headers
    assert not bad_files, bad_files
    assert not leaked, leaked
    assert not exhausted, [r.error for r in exhausted]  # every injected fault is transient: retried
    assert final_retries == len(final_faults) and sum(r.retries for r in records) <= len(faulty.injected)
