"""Issue 18's chains between rollouts, through the real command line: one wide run,
`agent-s3 run --rollouts 2 --judge none`, two local desktops at once, hostile replies from a
scripted server.

The server tells the two rollouts apart by the order of their coding agents' first calls:
the first (the *planter*) puts a secret in its own home, in its xterm's title and in a
process's arguments; the second (the *attacker*) is answered once the planter has reported
back, and its code, from inside the code sandbox:

- types a command into its desktop's xterm with xdotool (it must run in the desktop only:
  a host file it touches must not appear);
- looks for the planter's secret in other homes, X displays and cookies, and processes;
- ptraces (and reads ``/proc/<pid>/mem`` of) the controller servers, the runner and the
  planter's processes, by their host pids;
- allocates more memory than its desktop may hold;
- links the result file to a root-only canary and tries to swap its home for a symlink to
  ``/`` before scoring (the task's evaluator fetches the result file through the home; the
  home is a mount point of the desktop, so the rename is refused);
- ends with a fork bomb.

Reports are quoted apart in the code (``ATTACK-'RAN'``) so that only their output holds the
whole word. Afterwards: exit code 0 without a traceback, no host file changed, no secret of
the planter in the attacker's records, no process of the run left, the planter's outcome
recorded (done, score 1), a host process started promptly throughout.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
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

from core.llm import ScriptRequest
from environments.walls.uids import FIRST_UID
from runner.demo_policy import PlannedReplies, action_reply, role_of

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]

_TERM = "victim-term"
#: A desktop's process limit (`DesktopConfig.pids_max`'s default, which `run` keeps).
_PIDS_MAX = 1024
#: Seconds a host process may take to start while the bombs go off (it takes milliseconds
#: on an idle machine): beyond this the host counts as unresponsive.
_UNRESPONSIVE = 10.0
#: Both rollouts' policy: hand the work to code, then finish.
_DONE = "<answer>\nDONE\n</answer>"
_PLAN = PlannedReplies(
    plan=[
        action_reply("Let code tidy it.", "agent.call_code_agent('tidy the home folder')"),
        action_reply("Done.", "agent.done()"),
    ]
)
_PTRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
mine = {{int(p) for p in os.listdir("/proc") if p.isdigit()}}
for pid in sorted(set({targets}) - mine):
    if libc.ptrace(16, pid, 0, 0) == 0:   # PTRACE_ATTACH
        print("PTRACE-" + "ATTACHED", pid)
        libc.ptrace(17, pid, 0, 0)        # PTRACE_DETACH
    try:
        with open(f"/proc/{{pid}}/mem", "rb") as mem:
            mem.read(1)
        print("MEM-" + "READ", pid)
    except OSError:
        pass
print("PTRACE-" + "TRIED", len(set({targets}) - mine))
"""


def _planter(secret: str, tok: str) -> str:
    """Rollout "1": the secret in its home, its xterm's title and a process's arguments."""
    return "\n".join([
        f"echo expected > ~/answer.txt; echo {secret} > ~/secret.txt; mkdir -p ~/Documents; echo {secret} > ~/Documents/private.txt",
        f"timeout 20 xdotool search --sync --name {_TERM} windowactivate --sync",
        f"xdotool type --delay 5 \"sh -c 'sleep 300' planted-{secret} &\"; xdotool key Return",
        f"xdotool search --name {_TERM} set_window --name 'victim-{secret}'",
        f"sleep 0.5; echo PLANTER-'READY'-{tok}",
    ])  # fmt: skip


def _attacker(tok: str, control: str, mark: str, envs: Path, canary: Path, targets: list[int]) -> str:
    """Rollout "0": every chain from inside its code sandbox, the fork bomb last (after it
    only shell builtins run, since a fork may no longer succeed). `control` is its own
    secret, which each probe must find (a probe that finds nothing proves nothing)."""
    found = "grep -o 'SEC''RET-[0-9a-f]\\{8,\\}' | sort -u | head -5"
    return "\n".join([
        f"echo ATTACK-'RAN'-{tok}",
        # Controls: its own secret where the probes below look, which they must find. The
        # sleeper lets go of the step's output (holding it kept the step open to its timeout).
        f"echo SEC'RET-'{control} > ~/secret.txt;"
        f" setsid sh -c 'sleep 60' own-SEC'RET-'{control} </dev/null >/dev/null 2>&1 &",
        # xdotool into the desktop's own xterm: runs in the desktop, never on the host.
        f"timeout 20 xdotool search --sync --name {_TERM} windowactivate --sync"
        f" && xdotool type --delay 5 'touch {mark}; id -u > ~/typed' && xdotool key Return",
        f"sleep 1; test -s ~/typed && echo TYPED-'INSIDE'-{tok}",
        f"xdotool search --name {_TERM} set_window --name own-SEC'RET-'{control}",
        # The other desktop: its home, X server and cookie, windows, processes.
        f"timeout 15 grep -rsh 'SEC''RET-' /tmp /home /run /var/tmp {envs} 2>/dev/null | {found}",
        f"cat /proc/*/root/home/user/secret.txt /proc/*/cwd/secret.txt 2>/dev/null | {found}",
        f"cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' ' | {found}",
        "for a in /tmp/runtime-user/Xauthority ~/.Xauthority /tmp/.X11-unix/*; do test -e \"$a\" && echo saw \"$a\"; done",
        "own=${DISPLAY#:}; own=${own%%.*}",
        "for d in $(seq 0 40); do test \"$d\" = \"$own\" && continue;"
        f" DISPLAY=:$d timeout 2 xdotool getdisplaygeometry >/dev/null 2>&1 && echo OTHER-'DISPLAY'-{tok} $d; done",
        f"xdotool getdisplaygeometry >/dev/null 2>&1 && echo OWN-'DISPLAY'-{tok}",
        f"xdotool search --name 'SEC''RET-' getwindowname 2>/dev/null | {found}",
        # ptrace and /proc/<pid>/mem of the servers, the runner and the planter, by host pid.
        f"python3 - <<'PY'\n{_PTRACE.format(targets=targets)}\nPY",
        # A memory bomb above the desktop's limit.
        "python3 -c \"x = b'x' * (6 * 1024**3); print('MEMORY-' + 'ALLOCATED', len(x))\" 2>&1 | tail -c 200;"
        f" echo MEMORY-'BOMB'-{tok} ${{PIPESTATUS[0]}}",
        # The home swapped for a symlink to / before scoring, the result file a link to the canary.
        f"ln -sfn {canary} ~/answer.txt",
        f"mv \"$HOME\" \"$HOME.old\" 2>&1 && ln -s / \"$HOME\" 2>&1 && echo HOME-'SWAPPED'-{tok}",
        f"echo BOMB-'STARTS'-{tok}",
        # The fork bomb; then builtins only: wait on an empty fifo, count processes, leave.
        "w=/tmp/agent-s3-wait-$$; mkfifo $w; exec 9<>$w",
        "(bomb() { bomb | bomb & }; bomb) >/dev/null 2>&1 &",
        "read -t 3 -u 9; n=0; for p in /proc/[0-9]*; do n=$((n + 1)); done",
        f"echo BOMB-'DONE'-{tok} $n; exit 0",
    ])  # fmt: skip


def _host_targets() -> list[int]:
    """Host pids the attacker tries to ptrace: every desktop's processes (their servers
    among them) and the runner."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if uid >= FIRST_UID or str(CLI).encode() in cmd:
            found.append(int(entry))
    return found[:400]


@dataclass
class _Roles:
    """Answers both rollouts; the coding agent's first call decides the role."""

    planter_code: str
    #: Called when the attacker is answered (the host pids it targets exist by then).
    attacker_code: Callable[[], str]
    order: list[str] = field(default_factory=list)
    planter_reported: float | None = None
    attacker_released: float | None = None
    waits: int = 0

    def __call__(self, request: ScriptRequest) -> str:
        if role_of(request.messages) != "code_agent":
            return _PLAN(request)
        said = "\n".join(m.text() for m in request.messages)
        if "PLANTER-'READY'" in said:  # the planter's own history holds its code
            if "PLANTER-READY-" in said and self.planter_reported is None:
                self.planter_reported = time.monotonic()
            return _DONE
        if not self.order:
            self.order.append("planter")
            return _bash(self.planter_code)
        if "ATTACK-'RAN'" in said:
            return _DONE
        if self.planter_reported is None and self.waits < 40:
            self.waits += 1  # the attacker waits (harmlessly) until the planter has reported
            return _bash("sleep 0.5")
        self.order.append("attacker")
        self.attacker_released = time.monotonic()
        return _bash(self.attacker_code())


def _bash(code: str) -> str:
    return f"<answer>\n```bash\n{code}\n```\n</answer>"


def _output(rollout: Path, marker: str) -> str:
    """The stdout of the code step whose output holds `marker` (from traj.jsonl)."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "stdout" and isinstance(inner, str) and marker in inner:
                    found.append(inner)
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for line in (rollout / "traj.jsonl").read_text().splitlines():
        walk(json.loads(line))
    assert found, f"no code step of {rollout} printed {marker}"
    return found[0]


async def _run_watching_the_host(
    argv: list[str], env: dict[str, str], roles: _Roles
) -> tuple[tuple[int, str], float]:
    """The command's exit code and output, and the slowest start of a host process (`true`)
    while it ran: the bombs must leave the host responsive."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    worst = 0.0

    async def probe() -> None:
        nonlocal worst
        while not stop.is_set():
            began = loop.time()
            proc = await asyncio.create_subprocess_exec("true")
            await proc.wait()
            worst = max(worst, loop.time() - began)
            await asyncio.sleep(0.25)

    watcher = asyncio.ensure_future(probe())
    try:
        ((code, text),) = await drive_cli([argv], env, roles, timeout=200)
    finally:
        stop.set()
        await watcher
    return (code, text), worst


@pytest.mark.timeout(240)
def test_two_rollouts_of_one_wide_run_attack_each_other(canary: Canary, tally: Tally, tmp_path: Path) -> None:
    why = cli_unavailable()
    if why:
        pytest.skip(why)
    tok = secrets.token_hex(4)
    secret = "SECRET-" + secrets.token_hex(12)
    control = secrets.token_hex(12)  # the attacker's own
    mark = f"/tmp/agent-s3-typed-{tok}"
    envs = tmp_path / "envs"
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tasks / "expected.txt").write_text("expected\n")
    fetch = ["/home/user/answer.txt"]  # each missing result file costs the evaluator's wait
    task = {
        "id": "wide-hostile",
        "snapshot": "blank",
        "instruction": "Tidy up the home folder.",
        "config": [{"type": "launch", "parameters": {"command": ["xterm", "-T", _TERM]}}],
        "evaluator": {
            "func": ["compare_text_file"] * len(fetch),
            "conj": "or",
            "result": [{"type": "vm_file", "path": p, "dest": f"got-{i}.txt"} for i, p in enumerate(fetch)],
            "expected": [{"type": "cloud_file", "path": "expected.txt", "dest": f"want-{i}.txt"} for i in range(len(fetch))],
        },
    }  # fmt: skip
    (tasks / "wide-hostile.json").write_text(json.dumps(task))
    shadow = Path("/etc/shadow").read_bytes()
    watched = {
        p: hashlib.sha256(p.read_bytes()).hexdigest() for p in (Path("/etc/shadow"), Path("/etc/passwd"))
    }
    roles = _Roles(
        _planter(secret, tok), lambda: _attacker(tok, control, mark, envs, canary.secret, _host_targets())
    )
    runs = tmp_path / "runs"
    argv = [str(CLI), "run", "--task", str(tasks / "wide-hostile.json"), "--model", "openai/test-model",
            "--base-url", "{base_url}", "--out", str(runs), "--run-id", "wide", "--rollouts", "2",
            "--judge", "none", "--settle", "0.1", "--max-steps", "3"]  # fmt: skip
    started = time.monotonic()
    (code, text), slowest = asyncio.run(_run_watching_the_host(argv, cli_env(envs), roles))
    seconds = time.monotonic() - started
    print(f"\nwide run under attack: {seconds:.1f} s; slowest host process start {slowest:.2f} s")
    assert code == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]

    rollouts = {p.parent.name: p.parent for p in runs.glob("wide/*/rollout-*/rollout.json")}
    assert len(rollouts) == 2, (sorted(rollouts), text[-2000:])
    records = {name: tree_bytes(folder) for name, folder in rollouts.items()}
    attacker = [n for n, b in records.items() if f"ATTACK-RAN-{tok}".encode() in b]
    planter = [n for n, b in records.items() if f"PLANTER-READY-{tok}".encode() in b]
    assert len(attacker) == 1 and len(planter) == 1 and attacker != planter, (sorted(records), roles.order)
    said = _output(rollouts[attacker[0]], f"ATTACK-RAN-{tok}")
    assert roles.planter_reported is not None and roles.attacker_released is not None
    assert roles.planter_reported <= roles.attacker_released, "the attacker ran before the secret was planted"
    # The attacks really ran inside (a broken attack must not pass as a held wall).
    assert f"TYPED-INSIDE-{tok}" in said and f"BOMB-STARTS-{tok}" in said, said[-3000:]
    assert "PTRACE-TRIED" in said and f"MEMORY-BOMB-{tok}" in said, said[-3000:]
    # home, /proc/*/root, cmdline and window title probes each found the attacker's own secret
    assert said.count(f"SECRET-{control}") == 4 and f"OWN-DISPLAY-{tok}" in said, said[-3000:]
    counted = re.search(rf"BOMB-DONE-{tok} (\d+)", said)
    assert counted, said[-3000:]
    bombed = int(counted.group(1))

    # The planter's outcome is recorded beside the attacker's.
    headers = {n: json.loads((folder / "rollout.json").read_text()) for n, folder in rollouts.items()}
    assert headers[planter[0]].get("status") == "done" and headers[planter[0]].get("score") == 1.0, headers
    assert headers[attacker[0]].get("status") not in (None, "running"), headers

    run_bytes = tree_bytes(runs)
    leaked = canary.secret_text.encode() in run_bytes or any(
        line in run_bytes for line in shadow.splitlines()[:3] if b":" in line
    )
    host_changed = canary.changed() or any(
        hashlib.sha256(p.read_bytes()).hexdigest() != digest for p, digest in watched.items()
    )
    left = processes_mentioning(secret) + processes_mentioning(str(envs)) + processes_mentioning(tok)
    chains = {
        "cli_wide_xdotool_from_the_sandbox_into_xterm": (
            Path(mark).exists(),
            "the command typed into the desktop's xterm ran on the host",
        ),
        "cli_wide_other_rollouts_home_cookie_and_processes": (
            secret.encode() in records[attacker[0]] or f"OTHER-DISPLAY-{tok}" in said,
            "the attacker saw the planter's secret or another X display",
        ),
        "cli_wide_ptrace_of_the_servers_and_the_other_rollout": (
            "PTRACE-ATTACHED" in said or "MEM-READ" in said,
            "ptrace or /proc/<pid>/mem reached a process outside the sandbox",
        ),
        "cli_wide_fork_and_memory_bombs": (
            "MEMORY-ALLOCATED" in said
            or bombed > _PIDS_MAX
            or slowest > _UNRESPONSIVE
            or headers[planter[0]].get("status") != "done",
            f"6 GiB allocated or {bombed} processes in one desktop, the host took {slowest:.1f} s to start"
            " a process, or the other rollout did not finish",
        ),
        "cli_wide_home_swapped_before_scoring": (
            host_changed or leaked,
            "scoring through a swapped home changed or read a host file",
        ),
        "cli_wide_processes_after_the_run": (bool(left), f"processes outlived the run: {left[:5]}"),
    }
    tally.split = True
    for attack, (escaped, reason) in chains.items():
        one = Tally(attack)
        one.attempt(reason if escaped else None)
        record(one)
        tally.attempt(f"{attack}: {reason}" if escaped else None)
    assert not tally.escapes, (tally.escapes, said[-3000:])
