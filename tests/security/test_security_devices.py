"""Every output option of the command line, pointed at a device node, run as root: the node
is written through or the command refuses in one line; it is never replaced by a file.

The nodes are made with mknod in the test's own folder (character device 1,3: a null sink,
like /dev/null), one per command so the commands run at once; the machine's real /dev/null
is never touched. File options
(``critic-bench --json``/``--write``, ``env screenshot -o``) write through it; folder options
(``--out``, ``--export``, ``bench export ROOT``, ``--base-dir``, ``tasks check --out``, the run
folder ``judge --import-osworld`` creates, the run folder ``report`` and ``critic`` write into)
refuse it. A tally line
counts the options tried and the nodes replaced (escapes).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from security_helpers import CLI, Tally, cli_env, cli_unavailable

from core.trajectory import RolloutInfo, RunLayout, Step, Task

pytestmark = [pytest.mark.security, pytest.mark.integration]


def _run_folder(root: Path) -> Path:
    layout = RunLayout(root, "scored", durable=False)
    layout.path.mkdir(parents=True)
    layout.write_config({"policy": {"model": "openai/policy-model", "base_url": None}})
    task = Task(id="task-a", instruction="Save the notes")
    task_dir = layout.task(task.id)
    task_dir.write_task(task)
    for k, score in enumerate((1.0, 0.0)):
        rd = task_dir.rollout(k)
        rd.start(RolloutInfo(run_id="scored", task_id=task.id, rollout=k, model="openai/policy", started_at=time.time()))
        rd.append_step(Step(index=0, thought="done", action={"kind": "done"}), {})
        rd.finish("done", "the agent declared the task complete", score=score)
    return layout.path


def _osworld_result(root: Path) -> Path:
    """One OSWorld result folder (``--result_dir`` layout) for ``judge --import-osworld``."""
    from PIL import Image

    folder = root / "pyautogui" / "screenshot" / "gpt-5" / "os" / "task-7"
    folder.mkdir(parents=True)
    for name in ("step_0.png", "step_1.png"):
        Image.new("RGB", (32, 20)).save(folder / name)
    (folder / "instruction.txt").write_text("Create the folder reports")
    (folder / "traj.jsonl").write_text(json.dumps({"step_num": 1, "action": "DONE", "response": "done",
                                                   "screenshot_file": "step_1.png"}) + "\n")  # fmt: skip
    (folder / "result.txt").write_text("1.0")
    return root


def _task_folder(root: Path) -> Path:
    """A folder of one OSWorld-format task for ``tasks check``."""
    (root / "os").mkdir(parents=True)
    task = {"id": "x", "snapshot": "blank", "instruction": "Nothing", "config": [], "evaluator": {"func": "infeasible"}}
    (root / "os" / "x.json").write_text(json.dumps(task))
    return root


def _cli(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run([str(CLI), *argv], env=env, capture_output=True, text=True, timeout=240)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.timeout(400)
def test_cli_every_output_option_at_a_device_node(tmp_path: Path, tally: Tally) -> None:
    why = cli_unavailable()
    if why:
        pytest.skip(why)
    devices = tmp_path / "dev"
    devices.mkdir()
    envs = tmp_path / "envs"
    env = cli_env(envs)
    run = _run_folder(tmp_path / "runs")
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps({"id": i, "label": y}) + "\n" for i, y in (("a", 1), ("b", 0))))
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps({"a": 1, "b": 1}))
    dev = "{node}"  # each command gets a node of its own, so the commands can run at once
    model = ["--model", "scripted/demo"]
    # (option, argv, written through: exit 0; else refused in one line)
    cases = [
        ("critic-bench --write", ["critic-bench", "--labels-from", str(run), "--write", dev], True),
        ("critic-bench --json", ["critic-bench", str(labels), "--predictions", str(predictions), "--json", dev], True),
        ("run --out", ["run", "--task", "terminal-make-dirs", *model, "--out", dev], False),
        ("bench local --out", ["bench", "local", *model, "--run-id", "d", "--limit", "1", "--out", dev], False),
        ("bench local --export", ["bench", "local", *model, "--run-id", "d", "--limit", "1", "--out",
                                  str(tmp_path / "runs"), "--export", dev], False),
        ("bench export ROOT", ["bench", "export", str(run), dev], False),
        ("filter --out", ["filter", str(run), "--out", dev, "--critic", "lastk", "--model", "scripted/x"], False),
        ("sweep --out", ["sweep", str(run), "--mixtures", "openai/a*1", "--out", dev, "--model", "openai/b",
                         "--base-url", "http://127.0.0.1:9"], False),
        ("tasks check --out", ["tasks", "check", str(_task_folder(tmp_path / "tasks")), "--env", "local",
                               "--out", dev], False),
        ("judge RUN_DIR --import-osworld", ["judge", dev, "--import-osworld", str(_osworld_result(tmp_path / "r")),
                                            "--model", "openai/j", "--base-url", "http://127.0.0.1:9"], False),
        ("report RUN_DIR", ["report", dev], False),
        ("critic RUN_DIR", ["critic", dev, "--model", "scripted/x"], False),
        ("env up --base-dir", ["env", "up", "--base-dir", dev], False),
        ("env ls --base-dir", ["env", "ls", "--base-dir", dev], None),
        ("env down --base-dir", ["env", "down", "--all", "--base-dir", dev], None),
    ]  # fmt: skip
    desktop_up = _cli(["env", "up", "-n", "1", "--base-dir", str(envs)], env)
    listed = _cli(["env", "ls", "--base-dir", str(envs)], env)[1]
    names = [line.split()[0] for line in listed.splitlines()[1:] if line.strip()]
    if desktop_up[0] == 0 and names:
        cases.append(("env screenshot -o", ["env", "screenshot", names[0], "-o", dev, "--base-dir", str(envs)], True))
    nodes = []
    for i in range(len(cases)):
        nodes.append(devices / f"null-{i}")
        os.mknod(nodes[-1], stat.S_IFCHR | 0o666, os.makedev(1, 3))
    before = [os.lstat(node) for node in nodes]
    failures = []
    try:
        with ThreadPoolExecutor(max_workers=3) as pool:
            done = list(pool.map(lambda i: _cli([a.replace(dev, str(nodes[i])) for a in cases[i][1]], env),
                                 range(len(cases))))  # fmt: skip
        for (option, _, through), (code, said), node, was in zip(cases, done, nodes, before, strict=True):
            after = os.lstat(node)
            replaced = not stat.S_ISCHR(after.st_mode) or after.st_rdev != was.st_rdev or after.st_ino != was.st_ino
            tally.attempt(f"{option} replaced the device node" if replaced else None)
            if "Traceback" in said:
                failures.append(f"{option}: a traceback: {said[-500:]}")
            elif through is True and code != 0:
                failures.append(f"{option}: exit {code}: {said[-300:]}")
            elif through is False and (code == 0 or not any(line.startswith("error:") for line in said.splitlines())):
                failures.append(f"{option}: not refused in one line (exit {code}): {said[-300:]}")
            elif option.endswith("--out") and "is not a folder" not in said and "not a folder (" not in said:
                failures.append(f"{option}: refused without saying the folder is not one: {said[-300:]}")
    finally:
        _cli(["env", "down", "--all", "--base-dir", str(envs)], env)
    print(f"\noutput options pointed at device nodes in {devices}: {len(cases)}; replaced: {len(tally.escapes)}")
    assert names, f"no desktop came up for `env screenshot`: {desktop_up[1][-500:]}"
    assert not tally.escapes, tally.escapes
    assert not failures, failures
    assert sorted(os.listdir(devices)) == sorted(n.name for n in nodes)  # nothing left beside them either
