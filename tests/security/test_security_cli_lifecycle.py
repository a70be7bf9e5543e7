"""Issue 24's chains around a run's life, through the real command line:

- `agent-s3 run` SIGKILLed while its desktop's sandbox is being spawned (its set-up chain
  running, before bubblewrap could tie itself to its parent): nothing of the sandbox may
  outlive the runner, on record or not;
- `run --resume` of that run, killed before it wrote ``config.json``, is accepted and runs;
- a task file nested 200,000 levels deep is refused in one line, not a RecursionError.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from security_helpers import CLI, Tally, cli_env, cli_unavailable, processes_mentioning, record, scale

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]

#: The stages of a sandbox's set-up chain before bubblewrap runs (`environments.local.sandbox`).
_CHAIN = ("cgroup-join", "home-setup")


def _spawning(runner: int) -> bool:
    """Whether a child of `runner` is a sandbox in its set-up chain right now (read from the
    runner's own children, cheaply, so the short window is caught)."""
    try:
        threads = os.listdir(f"/proc/{runner}/task")
    except OSError:
        return False
    for tid in threads:
        try:
            kids = Path(f"/proc/{runner}/task/{tid}/children").read_text().split()
        except OSError:
            continue
        for kid in kids:
            try:
                cmd = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:
                continue
            if any(stage.encode() in cmd for stage in _CHAIN):
                return True
    return False


def _wait_spawning(runner: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and runner.poll() is None:
        if _spawning(runner.pid):
            return True
        time.sleep(0.0005)
    return False


@pytest.mark.timeout(600)
def test_cli_a_run_killed_while_its_sandbox_spawns(tmp_path: Path, tally: Tally) -> None:
    why = cli_unavailable()
    if why:
        pytest.skip(why)
    tally.split = True
    orphans = Tally("cli_sandbox_spawning_when_the_runner_is_killed")
    caught = 0
    runs = tmp_path / "runs"
    for attempt in range(scale()):
        envs = tmp_path / f"envs-{attempt}"
        argv = [str(CLI), "run", "--task", "terminal-make-dirs", "--model", "scripted/demo", "--out", str(runs),
                "--run-id", f"killed-{attempt}", "--settle", "0.1"]  # fmt: skip
        proc = subprocess.Popen(argv, env=cli_env(envs), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        caught += _wait_spawning(proc, 120)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        left: list[str] = []
        for _ in range(100):  # what dies with its owner dies at once; give the kernel a moment
            left = processes_mentioning(str(envs))
            if not left:
                break
            time.sleep(0.1)
        orphans.attempt(f"left running after the runner was killed: {left[:3]}" if left else None)
        for line in left:  # never leave them to the next test
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
    record(orphans)
    tally.attempt(orphans.escapes[0] if orphans.escapes else None)
    assert caught, "the runner was never caught while a sandbox was spawning"

    # The first killed run: no config.json, and --resume runs it.
    folder = runs / "killed-0"
    assert folder.is_dir() and not (folder / "config.json").exists()
    resumed = subprocess.run([*argv[:-4], "--run-id", "killed-0", "--settle", "0.1", "--resume"],
                             env=cli_env(tmp_path / "envs-resume"), capture_output=True, text=True, timeout=300)  # fmt: skip
    said = resumed.stdout + resumed.stderr
    resume = Tally("cli_resume_of_a_run_killed_before_its_configuration")
    resume.attempt(None if resumed.returncode == 0 and (folder / "config.json").exists() else f"refused: {said[-300:]}")
    record(resume)
    tally.attempt(resume.escapes[0] if resume.escapes else None)

    deep = tmp_path / "deep.json"
    deep.write_text('{"id": "deep", "instruction": "x", "config": ' + "[" * 200_000 + "]" * 200_000 + "}")
    done = subprocess.run([str(CLI), "run", "--task", str(deep), "--model", "scripted/demo"],
                          env=cli_env(tmp_path / "envs-deep"), capture_output=True, text=True, timeout=120)  # fmt: skip
    out = done.stdout + done.stderr
    nested = Tally("cli_task_file_nested_200000_levels")
    lines = [line for line in out.splitlines() if line.strip()]
    nested.attempt(None if done.returncode == 2 and len(lines) == 1 and "nests deeper" in out else f"said: {out[-300:]}")
    record(nested)
    tally.attempt(nested.escapes[0] if nested.escapes else None)
    assert not tally.escapes, tally.escapes
