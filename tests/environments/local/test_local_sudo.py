"""``sudo`` inside a desktop behaves as OSWorld's tasks and the paper's prompts expect.

What sudo users rely on: ``-S`` reads one line of stdin as the password and leaves the rest
to the command, a wrong or missing password refuses with sudo's lines, a success is
remembered per terminal (else per parent process), the command runs as root in the
caller's folder with sudo's reset environment and the caller's streams, its exit status
comes back, and a caller that goes away takes its command with it.
"""

from __future__ import annotations

import asyncio

import pytest
from local_helpers import inside

from core.protocols import Environment
from environments.local import LocalDesktop, desktop_client

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def run(desktop: LocalDesktop, script: str, timeout: float = 30.0) -> tuple[int, str, str]:
    async with desktop_client(desktop.info()) as client:
        done = await client.execute(["bash", "-c", script], timeout=timeout)
    return done.returncode, done.stdout, done.stderr


async def test_sudo_S_runs_as_root_with_the_rest_of_stdin_and_the_callers_folder(
    shared_desktops: list[LocalDesktop],
) -> None:
    desktop = shared_desktops[0]
    code, out, err = await run(
        desktop,
        "cd ~/Desktop && printf 'password\\nline two\\n' | sudo -S sh -c "
        "'id -u; pwd; cat; touch made; stat -c %U:%a made; echo HOME=$HOME USER=$USER SUDO_USER=$SUDO_USER; "
        "echo PATH=$PATH; echo FOO=$FOO; exit 7'",
    )
    lines = out.splitlines()
    assert code == 7, (out, err)
    assert lines[:4] == ["0", "/home/user/Desktop", "line two", "root:644"], out
    assert "HOME=/root USER=root SUDO_USER=user" in out
    assert "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" in out
    assert err.startswith("[sudo] password for user: ")
    # OSWorld's own setup step: a folder root made in the user's Desktop, which the user then renames.
    code, out, _ = await run(
        desktop,
        "echo password | sudo -S mkdir ~/Desktop/todo_list_Jan_1 && mv ~/Desktop/todo_list_Jan_1 ~/Desktop/todo_list_Jan_2 "
        "&& [ -d ~/Desktop/todo_list_Jan_2 ] && echo 'Directory exists.'",
    )
    assert out == "Directory exists.\n", out
    # (The last command of `bash -c` is exec'd by bash: its parent, and so its ticket, differ.)
    reset = "echo password | sudo -S true; FOO=1 sudo -n env | grep -c ^FOO= ; sudo -n -u user id -un; echo end"
    got = await run(desktop, reset)
    assert got[1].split() == ["0", "user", "end"], got


async def test_wrong_or_missing_password_runs_nothing(shared_desktops: list[LocalDesktop]) -> None:
    desktop = shared_desktops[1]
    await run(desktop, "sudo -K")
    code, _, err = await run(desktop, "echo wrong | sudo -S touch /tmp/ran")
    assert code == 1 and "Sorry, try again." in err and "sudo: no password was provided" in err, err
    code, _, err = await run(desktop, "printf 'a\\nb\\nc\\n' | sudo -S touch /tmp/ran")
    assert code == 1 and "sudo: 3 incorrect password attempts" in err, err
    code, _, err = await run(desktop, "sudo -n touch /tmp/ran")
    assert code == 1 and err.strip() == "sudo: a password is required", err
    code, _, err = await run(desktop, "sudo touch /tmp/ran < /dev/null")
    assert code == 1 and "a terminal is required to read the password" in err, err
    assert (await inside(desktop, "ls /tmp/ran 2>&1")).strip().endswith("No such file or directory")


async def test_a_success_is_remembered_per_caller_and_k_forgets_it(shared_desktops: list[LocalDesktop]) -> None:
    desktop = shared_desktops[0]
    _, out, err = await run(
        desktop, "sudo -K; echo password | sudo -S true && sudo -n id -u && sudo -k && sudo -n true; echo rc=$?"
    )
    assert out.split() == ["0", "rc=1"], (out, err)
    # Another caller (another shell, no terminal) has no ticket of its own.
    assert (await run(desktop, "sudo -n true; echo rc=$?"))[1].strip() == "rc=1"


async def test_a_caller_that_goes_away_takes_its_command(shared_desktops: list[LocalDesktop]) -> None:
    desktop = shared_desktops[1]
    async with desktop_client(desktop.info()) as client:
        done = await client.execute(["bash", "-c", "echo password | sudo -S sleep 77"], timeout=1.5)
    assert done.returncode != 0
    for _ in range(50):
        if (await inside(desktop, "pgrep -c -x sleep || true")).strip() == "0":
            break
        await asyncio.sleep(0.1)
    assert (await inside(desktop, "pgrep -c -x sleep || true")).strip() == "0", "the root command outlived its caller"
    # A signal the caller gets reaches the command (sudo relays it).
    _, out, _ = await run(
        desktop,
        "echo password | sudo -S sh -c 'trap \"echo got-term; exit 3\" TERM; sleep 30 & wait' & "
        "sleep 1.0; kill -TERM $!; wait $!; echo rc=$?",
    )
    assert "got-term" in out and "rc=3" in out, out


async def test_sudo_refuses_what_it_does_not_know(shared_desktops: list[LocalDesktop]) -> None:
    desktop = shared_desktops[0]
    code, _, err = await run(desktop, "echo password | sudo -S no-such-command")
    assert code == 1 and "sudo: no-such-command: command not found" in err
    code, _, err = await run(desktop, "sudo -Z true")
    assert code == 1 and "sudo: invalid option -- 'Z'" in err
    code, _, err = await run(desktop, "echo password | sudo -S -u nobody-here true")
    assert code == 1 and "sudo: unknown user nobody-here" in err
    code, out, _ = await run(desktop, "sudo -l")
    assert "(ALL : ALL) ALL" in out and code == 0


async def test_the_worker_is_told_the_sudo_rule(desktop_env: Environment) -> None:
    facts = await desktop_env.worker_facts()
    assert (facts.sudo, facts.password, facts.user_name) == ("with_password", "password", "user")
