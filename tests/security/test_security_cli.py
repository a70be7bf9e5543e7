"""Issue 18's attack chains through the real command line: `agent-s3 bench osworld` on
hostile task files, on local desktops, with hostile model replies from a scripted server.

One bench run (one desktop, reverted between tasks) carries every chain:

- the model's code leaves a ``setsid`` loop re-creating ``~/.bashrc`` (and ``~/.profile``)
  as a symlink to a root-owned host file, so the next task's revert runs against it;
- it poisons ``~/.bashrc``; the next task's code reports whether the poison survived;
- it plants ``~/answer.txt`` as a symlink to a root-only canary and to the server's
  environment, which the task's evaluator then fetches (``vm_file``), as it fetches the
  canary, /etc/shadow and the host's token file directly;
- it starts a ``setsid`` survivor that must not outlive the command;
- hostile task files: ``upload_file`` of a root-only host file, ``upload_file`` into /root,
  ``download`` of ``file:///root/...``, ``execute`` of ``cat`` on the canary and /etc/shadow.

Then `agent-s3 run` on one hostile task file alone. Afterwards: no host file changed, no
canary or shadow line in the run folders, no process of the runs alive, each refused task's
reason one line in its rollout.json (and on `run`'s terminal), exit code 0 (a refused task
is a failed rollout, not a crash), and rollout.json says which desktop had the internet
(the last task asks for it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from pathlib import Path

import pytest
from security_helpers import (
    CLI,
    Canary,
    Tally,
    cli_env,
    cli_unavailable,
    drive_cli,
    processes_mentioning,
    record,
    tree_bytes,
)

from runner.demo_policy import PlannedReplies, action_reply

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]


def _attack(canary: Canary, tok: str) -> str:
    """The coding agent's bash: report what survived the last revert, then plant again.
    Reports are quoted apart in the code (``ATTACK-'RAN'``) so that only their output, never
    the code recorded beside it, holds the whole word."""
    loop = (
        f"while :; do ln -sfn {canary.target} ~/.bashrc; ln -sfn {canary.target} ~/.profile; sleep 0.02; done"
    )
    return "\n".join([
        f"echo ATTACK-'RAN'-{tok}",
        f"grep -qs POISON-{tok} ~/.bashrc && echo BASHRC-'SURVIVED'-{tok}",
        f"test -L ~/.bashrc && echo LINK-'SURVIVED'-{tok}",
        f"pgrep -f '^sh -c while' >/dev/null && echo LOOP-'SURVIVED'-{tok}",  # not this script's own bash
        f"echo 'touch /tmp/agent-s3-persisted-{tok} # POISON-{tok}' >> ~/.bashrc",
        f"setsid sh -c '{loop}' agent-s3-loop-{tok} </dev/null >/dev/null 2>&1 &",
        f"setsid sh -c 'while :; do sleep 1; done' agent-s3-survivor-{tok} </dev/null >/dev/null 2>&1 &",
        f"ln -sfn {canary.secret} ~/answer.txt; ln -sfn /proc/1/environ ~/environ.txt",
        f"sleep 0.3; test -L ~/.bashrc && pgrep -f '^sh -c while' >/dev/null && echo LOOP-'PLANTED'-{tok}",
        f"cat {canary.secret} /etc/shadow 2>&1 | head -c 300; echo {canary.secret_text[:8]}-NOT-THE-SECRET",
        "true",
    ])  # fmt: skip


def _task(task_id: str, config: list[dict], evaluator: dict | None = None, **extra: object) -> dict:
    return {
        "id": task_id,
        "snapshot": "blank",
        "instruction": f"Tidy up the home folder ({task_id}).",
        "config": config,
        "evaluator": evaluator or {"func": "infeasible"},
        **extra,
    }


def _hostile_tasks(canary: Canary, token_file: str, tok: str) -> list[dict]:
    """In run order: the scored one first (its code plants what the reverts then meet)."""
    fetch = ["/home/user/leak.txt", "/home/user/environ.txt", "/home/user/answer.txt", str(canary.secret),
             "/etc/shadow", token_file]  # fmt: skip
    scored = _task(
        "scored-with-planted-links",
        [{"type": "execute", "parameters": {"command": f"cat {canary.secret} /etc/shadow /root/canary > ~/leak.txt 2>&1",
                                            "shell": True}}],
        {
            "func": ["compare_text_file"] * len(fetch),
            "conj": "or",
            "result": [{"type": "vm_file", "path": p, "dest": f"got-{i}.txt"} for i, p in enumerate(fetch)],
            "expected": [{"type": "cloud_file", "path": "expected.txt", "dest": f"want-{i}.txt"} for i in range(len(fetch))],
        },
    )  # fmt: skip
    return [
        scored,
        _task("upload-a-root-only-file", [{"type": "upload_file", "parameters": {
            "files": [{"local_path": str(canary.secret), "path": "/home/user/stolen.txt"}]}}]),
        _task("upload-into-root", [{"type": "upload_file", "parameters": {
            "files": [{"local_path": "expected.txt", "path": f"/root/agent-s3-pwned-{tok}"}]}}]),
        _task("download-a-root-file-url", [{"type": "download", "parameters": {
            "files": [{"url": f"file://{canary.secret}", "path": "/home/user/stolen.txt"}]}}]),
        _task("after-the-reverts", [], requires_network=True),
    ]  # fmt: skip


@pytest.mark.timeout(240)
def test_hostile_task_files_and_replies_through_bench(canary: Canary, tally: Tally, tmp_path: Path) -> None:
    why = cli_unavailable()
    if why:
        pytest.skip(why)
    tok = secrets.token_hex(4)
    envs = tmp_path / "envs"
    token_file = str(envs / "desktops" / "local-1" / "token")  # where the run's desktop keeps it
    examples = tmp_path / "examples"
    (examples / "hostile").mkdir(parents=True)
    tasks = _hostile_tasks(canary, token_file, tok)
    for task in tasks:
        (examples / "hostile" / f"{task['id']}.json").write_text(json.dumps(task))
    (examples / "hostile" / "expected.txt").write_text("expected\n")
    (tmp_path / "list.json").write_text(json.dumps({"hostile": [t["id"] for t in tasks]}))
    shadow = Path("/etc/shadow").read_bytes()
    watched = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (Path("/etc/shadow"), Path("/etc/passwd"))
    }

    plan = PlannedReplies(
        plan=[
            action_reply("Let code tidy it.", "agent.call_code_agent('tidy the home folder')"),
            action_reply("Done.", "agent.done()"),
        ],
        code=[f"<answer>\n```bash\n{_attack(canary, tok)}\n```\n</answer>", "<answer>\nDONE\n</answer>"],
    )
    env = cli_env(envs)
    model = ["--model", "openai/test-model", "--base-url", "{base_url}", "--out", str(tmp_path / "runs")]
    bench = [str(CLI), "bench", "osworld", "--tasks", str(tmp_path / "list.json"), "--examples", str(examples),
             "--env", "local", *model, "--settle", "0.1", "--run-id", "hostile", "-c", "rollout.max_steps=4"]  # fmt: skip
    alone = [str(CLI), "run", "--task", str(examples / "hostile" / "download-a-root-file-url.json"), *model,
             "--run-id", "hostile-single"]  # fmt: skip
    (code, text), (single_code, said) = asyncio.run(drive_cli([bench, alone], env, plan))
    run = tmp_path / "runs" / "hostile"
    assert code == 4, text[-3000:]  # hostile task files are refused at setup: errored tasks, never scores
    assert "Traceback" not in text, text[-3000:]
    trajectories = {p.parent.parent.name: p.read_text() for p in run.glob("*/rollout-*/traj.jsonl")}
    assert f"LOOP-PLANTED-{tok}" in trajectories.get("scored-with-planted-links", ""), sorted(trajectories)
    later = trajectories.get("after-the-reverts", "")
    assert f"ATTACK-RAN-{tok}" in later, sorted(trajectories)  # the attack ran again after three reverts

    # `run` on a hostile task file: refused before the agent starts, said in one line.
    assert single_code == 4, said  # a task that cannot be set up is an errored task, not a crash
    assert "setup_failed" in said and "Traceback" not in said, said
    assert "outside the task's folders" in " ".join(said.split()), said
    # Each hostile task file is refused, or its step stays inside the desktop, in one line.
    headers = {p.parent.parent.name: json.loads(p.read_text()) for p in run.glob("*/rollout-*/rollout.json")}
    reasons = {k: (h["status"], h.get("reason") or "") for k, h in headers.items()}
    assert reasons["upload-a-root-only-file"][0] == "setup_failed" and "outside the task's folders" in reasons[
        "upload-a-root-only-file"][1], reasons  # fmt: skip
    assert reasons["download-a-root-file-url"][0] == "setup_failed" and "outside the task's folders" in reasons[
        "download-a-root-file-url"][1], reasons  # fmt: skip
    assert reasons["upload-into-root"][0] == "setup_failed", reasons  # refused inside, as the desktop's user
    assert "Permission denied" in reasons["upload-into-root"][1] and "/root" in reasons["upload-into-root"][1]
    for _, reason in reasons.values():
        assert "\n" not in reason
    assert json.loads((run / "config.json").read_text())["environment"]["network"] == "task"
    assert (
        headers["after-the-reverts"]["network"] is True
        and headers["scored-with-planted-links"]["network"] is False
    )

    run_bytes = tree_bytes(tmp_path / "runs")  # both runs' folders
    # The execute step ran inside, as the desktop's user: what it saved is what the desktop could read.
    leak = [p.read_text(errors="replace") for p in run.rglob("got-0.txt")]
    assert leak and "No such file" in leak[0] and "Permission denied" in leak[0], leak
    leaked = canary.secret_text.encode() in run_bytes or any(
        line in run_bytes for line in shadow.splitlines()[:3] if b":" in line
    )
    host_changed = canary.changed() or any(
        hashlib.sha256(p.read_bytes()).hexdigest() != digest for p, digest in watched.items()
    )
    left = processes_mentioning(f"agent-s3-survivor-{tok}") + processes_mentioning(str(envs))
    # Each chain of this run: what would count as its escape.
    chains = {
        "cli_symlinked_bashrc_recreated_during_revert": (
            host_changed or f"LINK-SURVIVED-{tok}" in later or f"LOOP-SURVIVED-{tok}" in later,
            "a host file changed or the symlink loop survived the revert",
        ),
        "cli_bashrc_persistence_across_revert": (
            f"BASHRC-SURVIVED-{tok}" in later or Path(f"/tmp/agent-s3-persisted-{tok}").exists(),
            "the poisoned .bashrc survived the revert or ran on the host",
        ),
        "cli_links_to_token_and_canary_before_scoring": (
            leaked,
            "a canary or /etc/shadow reached the run folder",
        ),
        "cli_setsid_survivor_after_the_run": (bool(left), f"processes outlived the command: {left}"),
        "cli_task_file_upload_of_a_root_only_file": (
            reasons["upload-a-root-only-file"][0] != "setup_failed" or leaked,
            "the task file's upload_file read a root-only host file",
        ),
        "cli_task_file_upload_into_root": (
            Path(f"/root/agent-s3-pwned-{tok}").exists() or reasons["upload-into-root"][0] != "setup_failed",
            "the task file's upload_file wrote into /root",
        ),
        "cli_task_file_download_of_a_file_url": (
            reasons["download-a-root-file-url"][0] != "setup_failed" or leaked,
            "the task file's download read file:///... outside its folders",
        ),
        "cli_task_file_execute_and_getters": (
            leaked or host_changed,
            "the task file's execute or vm_file getters reached a root-only file",
        ),
    }
    tally.split = True
    for attack, (escaped, why) in chains.items():
        one = Tally(attack)
        one.attempt(why if escaped else None)
        record(one)
        tally.attempt(f"{attack}: {why}" if escaped else None)
    assert not list(envs.glob("desktops/*/token"))  # the desktop's folder went with it
    assert not tally.escapes, tally.escapes
