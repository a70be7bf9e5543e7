"""`agent-s3 run` as a user runs it: a subprocess that starts its own desktop, talks to a
model over HTTP, writes the run folder, and leaves no process behind (on Ctrl-C too)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runner_helpers import desktops_missing

from core.llm import Reply, Script
from runner.demo_policy import DEMO_PLANS, PlannedReplies, action_reply
from testing.llm import OpenAIServer

KEY = "sk-cli-test-" + "k" * 16
CLI = Path(sys.executable).with_name("agent-s3")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(AGENT_S3_ENV_DIR=str(tmp_path / "envs"), **extra)
    return env


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline:
            found.append(f"{entry}: {cmdline[:120]}")
    return found


def _files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def _needs_desktops() -> None:
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    if desktops_missing() is not None:
        pytest.skip(desktops_missing() or "")


@pytest.mark.desktop
@pytest.mark.integration
async def test_run_solves_a_suite_task_end_to_end(tmp_path: Path) -> None:
    _needs_desktops()
    plan = DEMO_PLANS["mousepad-append-line"]
    # The first call meets two server errors: the live progress says it is being retried.
    script = Script("cli", [Reply(error=502, fault="html"), Reply(error=500),
                            *[PlannedReplies(plan=list(plan.plan))] * 100])
    (tmp_path / "run.yaml").write_text("rollout:\n  settle_seconds: 0.2\nworker:\n  history_screenshots: 1\n")
    async with OpenAIServer(script, api_key=KEY) as server:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", "mousepad-append-line", "--model", "openai/test-model",
            "--base-url", server.base_url, "-c", str(tmp_path / "run.yaml"), "-c", "rollout.max_steps=8",
            "--out", str(tmp_path / "runs"), "--run-id", "cli-1",
            env=_env(tmp_path, OPENAI_API_KEY=KEY), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=150)
    stdout = out.decode()
    assert proc.returncode == 0, stdout + err.decode()
    assert "outcome done after 5 steps" in stdout and "score 1 (the task's evaluator)" in stdout
    assert "step 3: agent.type(text='apples', enter=True)" in stdout
    flat = " ".join(stdout.split())
    assert "policy call (openai/test-model, mousepad-append-line #0) retrying: server_error (HTTP 502), attempt 1" in flat
    assert "policy call (openai/test-model, mousepad-append-line #0) answered after 3 attempts" in flat
    run = tmp_path / "runs" / "cli-1"
    result = json.loads((run / "mousepad-append-line" / "result.json").read_text())
    assert result["selected_score"] == 1.0
    config = json.loads((run / "config.json").read_text())
    assert config["policy"]["model"] == "openai/test-model" and config["rollout"]["max_steps"] == 8
    assert config["rollout"]["settle_seconds"] == 0.2 and config["worker"]["history_screenshots"] == 1
    assert config["worker"]["ubuntu_open"] == "exec" and config["worker"]["facts"]["user_name"] == "user"
    assert len((run / "ledger.jsonl").read_text().splitlines()) == len(server.requests) - 2  # one call, 3 attempts
    assert _files_holding(run, KEY) == [], "the API key reached the run folder"
    assert _processes_mentioning(str(tmp_path / "envs")) == [], "the desktop outlived the command"


def test_a_missing_api_key_is_one_line_naming_the_variable(tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    done = subprocess.run(
        [str(CLI), "run", "--task", "mousepad-append-line", "--model", "openai/gpt-5", "--out", str(tmp_path / "runs")],
        env=_env(tmp_path), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY" in lines[0], done.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "envs").exists()


def test_user_errors_are_one_line_and_env_is_mounted(tmp_path: Path) -> None:
    if not CLI.exists():
        pytest.skip("the agent-s3 console script is not installed in this environment")
    done = subprocess.run(
        [str(CLI), "run", "--task", "no-such-task", "--model", "scripted/demo"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-task" in lines[0] and "mousepad-append-line" in lines[0]
    no_url = subprocess.run(
        [str(CLI), "run", "--task", "terminal-make-dirs", "--model", "scripted/demo", "--env", "osworld"],
        env=_env(tmp_path), capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip
    assert no_url.returncode == 2 and no_url.stderr.strip() == (
        "error: --env osworld needs the server's address: pass --url http://HOST:PORT"
    )
    listed = subprocess.run(
        [str(CLI), "env", "ls", "--base-dir", str(tmp_path / "envs")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0 and "no desktops running" in listed.stdout


@pytest.mark.desktop
@pytest.mark.integration
async def test_ctrl_c_stops_the_desktop_and_marks_the_rollout(tmp_path: Path) -> None:
    _needs_desktops()
    slow = Reply(text=action_reply("Slowly.", "agent.wait(1)"), delay=30)
    script = Script("slow", [slow] * 5)
    async with OpenAIServer(script, api_key=KEY) as server:
        proc = await asyncio.create_subprocess_exec(
            str(CLI), "run", "--task", "Wait a little.", "--model", "openai/test-model",
            "--base-url", server.base_url, "--out", str(tmp_path / "runs"), "--run-id", "cli-int",
            env=_env(tmp_path, OPENAI_API_KEY=KEY), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        task_dir = tmp_path / "runs" / "cli-int"
        for _ in range(600):
            if server.requests:
                break
            await asyncio.sleep(0.1)
        assert server.requests, "the run never called the model"
        proc.send_signal(signal.SIGINT)
        out, _err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 130, out.decode()
    assert "interrupted" in out.decode()
    headers = list(task_dir.glob("*/rollout-0/rollout.json"))
    assert len(headers) == 1
    header = json.loads(headers[0].read_text())
    assert header["status"] == "errored" and "interrupted" in header["reason"]
    assert _processes_mentioning(str(tmp_path / "envs")) == [], "the desktop outlived Ctrl-C"

