"""On real desktops, through the real command line: a task whose setup fails and a task whose
scorer crashes are errors, never scores, in every place a run reports (each rollout.json, the
live lines, the summary, summary.json, report.html, the OSWorld export, the exit status 4), and
no traceback or OSWorld log line reaches the terminal (they are in run.log). ``agent-s3 tasks
check`` sets up and scores untouched, with no model, a sample of OSWorld's real task files (one
per domain that sets up offline on these desktops) and the two broken tasks. ``scripted/noop``
and ``scripted/noop-fail`` run without any API key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from osworld_reader import get_result
from runner_helpers import desktops_missing

from environments.tasks import load_task
from environments.tasks.support import installed_here, programs
from reference_data import OSWORLD_TASKS, requires_osworld_tasks

pytestmark = [pytest.mark.desktop, pytest.mark.integration, requires_osworld_tasks]

AGENT = Path(sys.executable).with_name("agent-s3")
#: OSWorld tasks that set up offline on these desktops today, one per domain (infeasible ones
#: and one scored by a metric through a getter), kept only when their programs are installed.
SAMPLE = {
    "gimp": "5ca86c6f-f317-49d8-b6a7-b527541caae8",
    "libreoffice_impress": "2cd43775-7085-45d8-89fa-9e35c0a915cf",
    "multi_apps": "6d72aad6-187a-4392-a4c4-ed87269c51cf",
    "os": "b3d4a89c-53f2-4d6b-8b6a-541fb5d205fa",
    "vlc": "7882ed6e-bece-4bf0-bada-c32dc1ddae72",
}
SETUP_FAILS = "zz-setup-fails"
SCORER_CRASHES = "zz-scorer-crashes"
BROKEN = {
    SETUP_FAILS: {
        "id": SETUP_FAILS, "snapshot": "os", "instruction": "Say hello.",
        "config": [{"type": "execute", "parameters": {"command": ["agent-s3-no-such-program", "--now"]}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "echo hi"},
                      "expected": {"type": "rule", "rules": {"expected": "hi"}}},
    },
    SCORER_CRASHES: {  # OSWorld's vm_file getter needs "path": its KeyError is the crash
        "id": SCORER_CRASHES, "snapshot": "os", "instruction": "Write a file.",
        "config": [],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_file", "dest": "out.txt"},
                      "expected": {"type": "rule", "rules": {"expected": "x"}}},
    },
}  # fmt: skip
_ENV = {**os.environ, "COLUMNS": "250"}


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    """A task folder: the installed part of the sample, and the two broken tasks under ``os``."""
    reason = desktops_missing()
    if reason is not None:
        pytest.skip(reason)
    root = tmp_path / "examples"
    for domain, task_id in SAMPLE.items():
        source = OSWORLD_TASKS / "examples" / domain / f"{task_id}.json"
        if all(installed_here(p) for p in programs(load_task(source, domain))):
            (root / domain).mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, root / domain / source.name)
    for task_id, data in BROKEN.items():
        (root / "os").mkdir(parents=True, exist_ok=True)
        (root / "os" / f"{task_id}.json").write_text(json.dumps(data))
    return root


def _list(tmp_path: Path, tasks: dict[str, list[str]]) -> Path:
    """An OSWorld task list of `tasks` (domain → ids)."""
    path = tmp_path / "test_some.json"
    path.write_text(json.dumps(tasks))
    return path


def _agent(*args: str, env_dir: Path, timeout: int = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(AGENT), *args], env={**_ENV, "AGENT_S3_ENV_DIR": str(env_dir)},
                          capture_output=True, text=True, timeout=timeout)


def _quiet_terminal(done: subprocess.CompletedProcess[str]) -> None:
    """No traceback and none of OSWorld's own log lines (they start with its message; on the
    terminal it appears only inside the one line that names the task and step)."""
    both = done.stdout + done.stderr
    assert "Traceback" not in both and "desktopenv" not in both
    assert not [line for line in both.splitlines() if line.startswith(("Failed to launch", "Command executed"))]


def _sample(examples: Path) -> dict[str, list[str]]:
    """The installed part of the sample, by domain."""
    found: dict[str, list[str]] = {}
    for path in sorted(examples.glob("*/*.json")):
        if path.stem not in BROKEN:
            found.setdefault(path.parent.name, []).append(path.stem)
    return found


@pytest.mark.timeout(420)
def test_bench_counts_a_failed_setup_and_a_crashed_scorer_as_errors(examples: Path, tmp_path: Path) -> None:
    sure = SAMPLE["os"]
    sample = _sample(examples)
    listed = _list(tmp_path, {**sample, "os": [*sample["os"], SETUP_FAILS, SCORER_CRASHES]})
    out, results = tmp_path / "runs", tmp_path / "results"
    done = _agent("bench", "osworld", "--tasks", str(listed), "--examples", str(examples), "--model", "scripted/noop",
                  "--settle", "0.3", "--parallel", "2", "--out", str(out), "--run-id", "errs", "--export", str(results),
                  env_dir=tmp_path / "envs")
    assert done.returncode == 4, done.stdout + done.stderr
    _quiet_terminal(done)
    lines = done.stdout
    for task_id in (t for ids in sample.values() for t in ids):  # done at once: every real task scores 0
        assert f"{task_id} selected 0 score 0, pass@1 0.0" in lines
    n = sum(len(ids) for ids in sample.values())
    assert (f"{SETUP_FAILS} setup_failed: setup step 0 (execute) failed: Failed to launch application. Status code: "
            in lines) and "agent-s3-no-such-program" in lines
    assert f"{SCORER_CRASHES} scoring_failed: getter 'vm_file' (result) failed: KeyError: 'path'" in lines
    assert f"tasks run {n + 2}: scored {n}, errored 2 (scoring_failed 1, setup_failed 1)" in lines
    assert "SCRIPTED" in lines and "module errors none" in lines

    run = out / "errs"
    headers = {t: json.loads((run / t / "rollout-0" / "rollout.json").read_text()) for t in (sure, *BROKEN)}
    assert headers[sure]["status"] == "done" and headers[sure]["score"] == 0.0
    assert headers[SETUP_FAILS]["status"] == "setup_failed" and headers[SETUP_FAILS]["step_count"] == 0
    crashed = headers[SCORER_CRASHES]
    assert (crashed["status"], crashed["score"]) == ("done", None)  # the agent's ending is kept for judges
    assert crashed["score_error"] == f"task {SCORER_CRASHES}: getter 'vm_file' (result) failed: KeyError: 'path'"
    assert headers[sure]["model"] == "scripted/noop"

    summary = json.loads((run / "summary.json").read_text())
    assert (summary["overall"]["tasks"], summary["overall"]["errored"], summary["overall"]["selected"]) == (n, 2, 0.0)
    assert (summary["domains"]["os"]["tasks"], summary["domains"]["os"]["errored"]) == (1, 2)
    html = (run / "report.html").read_text()
    errors = html[html.index('<section id="errors">'):html.index("</section>")]
    assert "<td>setup_failed</td>" in errors and "<td>scoring_failed</td>" in errors
    assert f"tasks run {n + 2}: scored {n}, errored 2" in errors and "SCRIPTED" in html

    folder = results / "pyautogui" / "screenshot" / "noop"
    left = json.loads((folder / "left_out.json").read_text())
    assert set(left) == set(BROKEN) and left[SETUP_FAILS]["why"].startswith("errored, no score: rollout 0 setup_failed")
    assert sorted(p.name for p in folder.glob("*/*")) == sorted(t for ids in sample.values() for t in ids)
    read = get_result("pyautogui", "noop", "screenshot", str(results))
    assert read is not None and read.overall == 0.0 and sum(len(v) for v in read.scores.values()) == n

    log = (run / "run.log").read_text()
    assert "desktopenv.setup" in log and "agent-s3-no-such-program" in log  # OSWorld's own line, kept here


@pytest.mark.timeout(300)
def test_noop_fail_answers_the_infeasible_tasks_and_needs_no_key(examples: Path, tmp_path: Path) -> None:
    infeasible = {d: [t for t in ids if load_task(examples / d / f"{t}.json").evaluator.func == "infeasible"]
                  for d, ids in _sample(examples).items()}
    infeasible = {d: ids for d, ids in infeasible.items() if ids}
    assert SAMPLE["os"] in infeasible["os"]
    listed = _list(tmp_path, infeasible)
    env = {k: v for k, v in _ENV.items() if not k.endswith("_API_KEY")}
    done = subprocess.run(
        [str(AGENT), "bench", "osworld", "--tasks", str(listed), "--examples", str(examples), "--model",
         "scripted/noop-fail", "--parallel", "2", "--out", str(tmp_path / "runs"), "--run-id", "fail"],
        env={**env, "AGENT_S3_ENV_DIR": str(tmp_path / "envs")}, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    n = sum(len(ids) for ids in infeasible.values())
    for task_id in (t for ids in infeasible.values() for t in ids):  # FAIL is an infeasible task's answer
        assert f"{task_id} selected 0 score 1, pass@1 1.0" in done.stdout
    assert f"tasks run {n}: scored {n}, errored 0" in done.stdout
    assert "SCRIPTED" in done.stdout and "scripted do-nothing policy" in done.stdout


@pytest.mark.timeout(420)
def test_tasks_check_sets_up_and_scores_real_osworld_tasks_untouched(examples: Path, tmp_path: Path) -> None:
    sample = sorted(t for ids in _sample(examples).values() for t in ids)
    assert SAMPLE["os"] in sample and len(sample) >= 3
    done = _agent("tasks", "check", str(examples), "--json", "--parallel", "2", "--out", str(tmp_path / "runs"),
                  "--run-id", "check", env_dir=tmp_path / "envs")
    assert done.returncode == 4, done.stdout + done.stderr
    _quiet_terminal(done)
    document = json.loads(done.stdout)  # stdout is the JSON alone; progress went to stderr
    by_id = {t["task_id"]: t for t in document["tasks"]}
    assert set(by_id) == {*sample, *BROKEN}
    for task_id in sample:
        t = by_id[task_id]
        assert (t["outcome"], t["setup_ok"], t["scorer_ok"], t["score"]) == ("ok", True, True, 0.0), t
        assert t["seconds"] > 0 and t["environment"]
    assert by_id[SETUP_FAILS]["outcome"] == "setup_failed" and by_id[SETUP_FAILS]["scorer_ok"] is None
    assert "setup step 0 (execute) failed" in by_id[SETUP_FAILS]["reason"]
    assert by_id[SCORER_CRASHES]["outcome"] == "scoring_failed"
    assert by_id[SCORER_CRASHES]["reason"].endswith("getter 'vm_file' (result) failed: KeyError: 'path'")
    summary = document["summary"]
    n = len(sample) + 2
    assert summary["line"].startswith(f"checked {n} tasks: set up {n - 1}, scored {n - 2}, flagged 0")
    assert not summary["ok"] and summary["errored"] == {"setup_failed": 1, "scoring_failed": 1}
    assert document["scorer"] == "desktop-env 1.0.2" and document["leaderboard_comparable"] is False
    assert json.loads((tmp_path / "runs" / "check" / "check.json").read_text()) == document
    assert summary["line"] in done.stderr and f"{SCORER_CRASHES}: setup ok, scorer FAILED" in done.stderr
