"""Every subcommand, given bad input through the real ``agent-s3`` console script, answers
with one ``error:`` line and exit code 2: never a Python traceback."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hardening_helpers import fill, info, step

from core.trajectory import RunFolderError, RunLayout, Task, TaskResult
from runner.cli.errors import describe_error

_SCRIPT = Path(sys.executable).with_name("agent-s3")
_SRC = Path(__file__).resolve().parents[2] / "src"


def _agent_s3(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(_SRC), "COLUMNS": "200"}
    env.pop("AGENT_S3_DEBUG", None)
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([str(_SCRIPT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _finished_run(root: Path, run_id: str = "r1") -> RunLayout:
    layout = RunLayout(root, run_id, durable=False)
    layout.write_config({"strategy": "single", "policy": {"model": "scripted/demo"}})
    task_dir = layout.task("mousepad-append-line")
    task_dir.write_task(Task(id="mousepad-append-line", instruction="Append 'apples' to the list and save it."))
    rd = task_dir.rollout(0)
    rd.start(info("mousepad-append-line", 0, run_id))
    for i in range(3):
        rd.append_step(step(i), screenshots={"before": b"png", "after": b"png"})
    rd.finish("done", score=1.0)
    task_dir.write_result(TaskResult.from_scores("mousepad-append-line", {0: 1.0}, selected=0))
    return layout


def _damaged_header(root: Path) -> Path:
    layout = _finished_run(root, "bad-header")
    layout.rollout("mousepad-append-line", 0).info_path.write_text('{"run_id": ')
    return layout.path


def _lost_last_step(root: Path) -> Path:
    layout = _finished_run(root, "lost-step")
    traj = layout.rollout("mousepad-append-line", 0).traj_path
    traj.write_bytes(b"".join(traj.read_bytes().splitlines(keepends=True)[:-1]))
    return layout.path


def _bad_ledger(root: Path) -> Path:
    layout = _finished_run(root, "bad-ledger")
    layout.ledger_path.write_text('{"broken": \n{"id": 1}\n')
    return layout.path


_CASES = {
    "run: unknown task": (["run", "--task", "no-such-task-xyz"], "neither a task file nor a task id"),
    "run: NaN timeout": (["run", "--task", "mousepad-append-line", "-c", "policy.timeout=nan"], "finite number"),
    "run: infinite settle": (["run", "--task", "mousepad-append-line", "--settle", "inf"], "finite number"),
    "run: negative action timeout": (["run", "--task", "mousepad-append-line", "-c",
                                      "environment.action_timeout=-5"], "greater than 0"),
    "run: huge mixture": (["run", "--task", "mousepad-append-line", "--mixture", "openai/x*100000000"],
                          "too many rollouts"),
    "run: 400-digit mixture": (["run", "--task", "mousepad-append-line", "--mixture", "openai/x*" + "9" * 400],
                               "too many rollouts"),
    "run: too many rollouts": (["run", "--task", "mousepad-append-line", "--rollouts", "100000"],
                               "less than or equal to 10000"),
    "run: missing config file": (["run", "--task", "mousepad-append-line", "-c", "/no/such.yaml"], "not found"),
    "run: existing run id": (["run", "--task", "mousepad-append-line", "--model", "scripted/demo",
                              "--out", "{root}", "--run-id", "r1"], "already exists: pass --resume"),
    "run: resume and overwrite": (["run", "--task", "mousepad-append-line", "--model", "scripted/demo",
                                   "--out", "{root}", "--run-id", "r1", "--resume", "--overwrite"], "not both"),
    "run: nothing to resume": (["run", "--task", "mousepad-append-line", "--model", "scripted/demo",
                                "--out", "{root}", "--run-id", "none-yet", "--resume"], "no run none-yet"),
    "run: resume another task": (["run", "--task", "terminal-make-dirs", "--model", "scripted/demo",
                                  "--out", "{root}", "--run-id", "r1", "--resume"], "ran task mousepad-append-line"),
    "report: damaged header": (["report", "{bad-header}"], "rollout.json is not a valid RolloutInfo"),
    "report: lost last step": (["report", "{lost-step}"], "traj.jsonl holds 2 steps but"),
    "report: damaged ledger": (["report", "{bad-ledger}"], "ledger.jsonl:1"),
    "report: not a folder": (["report", "/no/such/run"], "not a run folder"),
    "judge: lost last step": (["judge", "{lost-step}", "--model", "scripted/demo-judge"], "traj.jsonl holds 2 steps"),
    "bench metrics: damaged header": (["bench", "metrics", "{bad-header}"], "rollout.json is not a valid"),
    "bench export: lost last step": (["bench", "export", "{lost-step}", "{root}/exported"], "holds 2 steps"),
    "bench local: demo without run id": (["bench", "local", "--model", "scripted/demo"], "needs --run-id"),
    "bench osworld: missing list": (["bench", "osworld", "--tasks", "/no/such.json", "--run-id", "x"],
                                    "cannot read the task list"),
    "env up: more desktops than fit": (["env", "up", "-n", "100000"], "do not fit on this machine"),
    "critic-bench: a folder of no known layout": (["critic-bench", "{root}"], "no */trajectory.json (OGRBench)"),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("cli")
    _finished_run(root)
    return {"root": str(root), "bad-header": str(_damaged_header(root)),
            "lost-step": str(_lost_last_step(root)), "bad-ledger": str(_bad_ledger(root))}


@pytest.mark.parametrize("case", list(_CASES), ids=list(_CASES))
def test_bad_input_is_one_error_line(case: str, runs: dict[str, str], tmp_path: Path) -> None:
    args, expected = _CASES[case]
    done = _agent_s3(*(a.format(**runs) for a in args), cwd=tmp_path)
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    assert done.returncode == 2, output
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert expected in errors[0], errors[0]


def test_a_full_disk_is_one_error_line(small_disk: Path, tmp_path: Path) -> None:
    layout = _finished_run(small_disk)
    fill(small_disk)
    done = _agent_s3("bench", "metrics", str(layout.path), cwd=tmp_path)
    assert "Traceback" not in done.stdout + done.stderr
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        line for line in done.stderr.strip().splitlines() if line.startswith("error: No space left on device")
    ], done.stderr
    assert "free some space" in done.stderr


def test_credentials_in_a_url_stay_out_of_the_terminal(tmp_path: Path) -> None:
    done = _agent_s3("run", "--task", "mousepad-append-line", "--model", "openai/gpt-5", "--base-url",
                     "https://alice:s3cr3t-pw@llm.example/v1", "-c", "policy.timeout=nan", cwd=tmp_path)
    assert done.returncode == 2 and "s3cr3t-pw" not in done.stdout + done.stderr


def test_existing_run_is_replaced_only_with_overwrite(runs: dict[str, str], tmp_path: Path) -> None:
    """The refusal leaves the earlier run as it was (nothing written into it)."""
    root = Path(runs["root"])
    before = {p: p.read_bytes() for p in (root / "r1").rglob("*") if p.is_file()}
    done = _agent_s3("run", "--task", "mousepad-append-line", "--model", "scripted/demo", "--out", str(root),
                     "--run-id", "r1", cwd=tmp_path)
    assert done.returncode == 2
    assert {p: p.read_bytes() for p in (root / "r1").rglob("*") if p.is_file()} == before
    assert json.loads((root / "r1" / "config.json").read_text())["strategy"] == "single"


def test_the_error_line_says_what_and_where() -> None:
    assert describe_error(KeyError("no plan for task x")) == "no plan for task x"
    full = describe_error(OSError(errno.ENOSPC, "No space left on device", "/runs/r/ledger.jsonl"))
    assert full.startswith("No space left on device (/runs/r/ledger.jsonl): free some space")
    assert describe_error(RunFolderError("/runs/r/config.json is not valid JSON")).startswith("/runs/r/config.json")
    inside = describe_error(OSError(errno.ENOTDIR, "Not a directory", "/tmp/n/run-1"))
    assert inside == "Not a directory (/tmp/n/run-1): a part of the path is not a folder (a file or a device): give a folder"
    assert "if it is not a folder, give a folder" in describe_error(OSError(errno.EEXIST, "File exists", "/tmp/n"))
