"""Issue 18's attack chains, each tried against real confined desktops; none may escape.

An escape is anything of the host or of another desktop that a desktop's code reached:
a host file changed or read, a canary or token seen, a process surviving revert or close,
a limit not holding. Each test also checks that the attack really ran inside (so a broken
attack cannot pass as a held wall).
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat

import pytest
from security_helpers import (
    Canary,
    Tally,
    act,
    fetch,
    host_file_exists,
    scale,
    shell,
    spawn_daemon,
    wait_process,
    wait_window,
)

from environments.local import DesktopConfig, LocalDesktop, LocalEnvironment, desktop_client
from environments.local.homes import mounted_below
from environments.local.server_env import server_environment
from environments.local.spawner import run_blocking
from environments.walls.uids import uid_busy

pytestmark = [pytest.mark.security, pytest.mark.desktop, pytest.mark.integration]


async def test_symlinked_bashrc_recreated_during_revert(
    pair: list[LocalEnvironment], canary: Canary, tally: Tally
) -> None:
    env = pair[0]
    for _ in range(scale()):
        loop = (
            f"while :; do ln -sfn {canary.target} ~/.bashrc; ln -sfn {canary.target} ~/.config/mimeapps.list; "
            f"ln -sfn {canary.folder} ~/Documents; done"
        )
        await spawn_daemon(env, loop)
        planted = await shell(env.desktop, "sleep 0.2; readlink ~/.bashrc")
        assert str(canary.target) in planted, planted  # the attack ran
        await env.revert()
        after = await shell(env.desktop, "test -L ~/.bashrc && echo LINK; pgrep -c -f 'l[n] -sfn' || true")
        escaped = None
        if canary.changed():
            escaped = "a root-owned host file changed during revert"
        elif "LINK" in after or after.strip().splitlines()[-1] != "0":
            escaped = "the symlink loop survived revert"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_home_swapped_for_a_symlink(pair: list[LocalEnvironment], canary: Canary, tally: Tally) -> None:
    env = pair[0]
    desktop = env.desktop
    for _ in range(scale()):
        swap = await shell(
            desktop,
            f"mv /home/user /home/old 2>&1; ln -sfn {canary.folder} /home/user 2>&1; "
            f"cd ~ && mv Documents Docs.old && ln -s {canary.folder} Documents && echo SWAPPED",
        )
        assert "SWAPPED" in swap, swap
        await env.revert()
        host_dir = os.lstat(desktop.dir)
        homes = desktop.dir / "homes"
        escaped = None
        if canary.changed():
            escaped = "revert wrote through the swapped home"
        elif stat.S_IMODE(host_dir.st_mode) != 0o700 or host_dir.st_uid != 0:
            escaped = "the desktop's host folder is not root-only"
        elif desktop.home is None or desktop.home.is_symlink() or mounted_below(desktop.home):
            escaped = "the new home is reachable in the host's mount table"
        elif list(desktop.home.iterdir()):
            escaped = "the desktop's files appear in the host's namespace"
        elif any(p.is_symlink() for p in homes.iterdir()):
            escaped = "a symlink sits among the host's homes"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_symlinks_to_the_token_and_a_root_canary_before_scoring(
    pair: list[LocalEnvironment], canary: Canary, tally: Tally
) -> None:
    env = pair[0]
    info = env.desktop.info()
    token = info.token() or ""
    assert token
    for _ in range(scale()):
        await shell(
            env.desktop,
            f"ln -sfn {info.token_file} ~/Desktop/answer.txt; "
            f"ln -sfn {canary.secret} ~/Desktop/gold.txt; ln -sfn /proc/1/environ ~/Desktop/env.txt",
        )
        # What code in the desktop can see of the server that holds the token.
        looked = await shell(
            env.desktop,
            "ps -eo args; cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null "
            "| tr '\\0' ' '; cat /proc/[0-9]*/mem 2>/dev/null | head -c 1000000; "
            "grep -rs -m1 -I . /tmp /run /home 2>/dev/null | head -c 200000",
        )
        async with desktop_client(info) as client:  # the evaluator's way to fetch result files
            fetched = [
                await fetch(client, f"~/Desktop/{name}") for name in ("answer.txt", "gold.txt", "env.txt")
            ]
        blob = looked.encode() + b"".join(f or b"" for f in fetched)
        escaped = None
        if token.encode() in blob:
            escaped = "the controller token reached the desktop or the evaluator's fetch"
        elif canary.secret_text.encode() in blob:
            escaped = "the root-only canary left the host"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_xdotool_from_the_code_sandbox_into_xterm(pair: list[LocalEnvironment], tally: Tally) -> None:
    env = pair[0]
    box = env.sandbox()
    assert box is not None
    for _ in range(scale()):
        mark = f"/tmp/agent-s3-typed-{secrets.token_hex(4)}"
        async with desktop_client(env.desktop.info()) as client:
            await client.launch(["xterm", "-T", "victim-term"])
        assert await wait_window(env.desktop, "victim-term")
        typed = await box.run(
            "bash",
            "xdotool search --name victim-term windowactivate --sync && "
            f"xdotool type --delay 5 'touch {mark}; id -u > ~/typed'; xdotool key Return",
            timeout=60,
        )
        assert typed.ok, typed
        await asyncio.sleep(1.0)
        inside = await shell(env.desktop, f"cat ~/typed 2>/dev/null; test -e {mark} && echo MARKED")
        escaped = f"typed code touched {mark} on the host" if host_file_exists(mark) else None
        tally.attempt(escaped)
        if "MARKED" in inside:  # the typing worked: it stayed inside the desktop
            assert str(env.desktop.uid) in inside
    assert not tally.escapes, tally.escapes


async def test_bashrc_persistence_across_revert(pair: list[LocalEnvironment], tally: Tally) -> None:
    env = pair[0]
    for _ in range(scale()):
        mark = f"/tmp/agent-s3-persisted-{secrets.token_hex(4)}"
        await act(
            env, f"open('/home/user/.bashrc', 'a').write('touch {mark}; echo persisted > ~/persist\\n')"
        )
        await env.revert()
        async with desktop_client(env.desktop.info()) as client:
            await client.launch(["xterm", "-T", "next-term"])
        assert await wait_window(env.desktop, "next-term")
        await asyncio.sleep(0.5)
        inside = await shell(
            env.desktop, f"cat ~/persist 2>/dev/null; test -e {mark} && echo MARKED; cat ~/.bashrc"
        )
        escaped = None
        if host_file_exists(mark):
            escaped = "the persisted .bashrc ran on the host"
        elif "persisted" in inside or "MARKED" in inside:
            escaped = "the poisoned .bashrc survived revert"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_cross_desktop_cookie_read_and_typing(pair: list[LocalEnvironment], tally: Tally) -> None:
    attacker, victim = pair
    for _ in range(scale()):
        secret = "VICTIM-" + secrets.token_hex(8)
        await shell(victim.desktop, f"echo {secret} > ~/Documents/private.txt")
        async with desktop_client(victim.desktop.info()) as client:
            await client.launch(["xterm", "-T", f"victim-{secret}"])
        assert await wait_window(victim.desktop, f"victim-{secret}")
        victim_home = str(victim.desktop.home)
        probe = await shell(
            attacker.desktop,
            (
                f"cat {victim_home}/Documents/private.txt /proc/*/root/home/user/Documents/private.txt 2>/dev/null; "
                "ls -A /tmp/.X11-unix; cat /tmp/runtime-user/Xauthority | base64 | head -c 0; "
                "for d in 0 1 2 3 4 5 6 7 8 9; do DISPLAY=:$d timeout 3 wmctrl -l 2>/dev/null; done; "
                f"grep -rs {secret} /home /tmp /run 2>/dev/null"
            ),
        )
        escaped = None
        if secret in probe:
            escaped = "one desktop read another's home or saw its windows"
        elif probe.split().count("X0") != 1 or any(f"X{n}" in probe.split() for n in range(1, 10)):
            escaped = "another X server's socket is visible"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


_PTRACE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
out = []
for pid in {targets}:
    if libc.ptrace(16, pid, 0, 0) == 0:   # PTRACE_ATTACH
        out.append(f"ATTACHED {{pid}}")
        libc.ptrace(17, pid, 0, 0)        # PTRACE_DETACH
    else:
        out.append(f"refused {{pid}} errno {{ctypes.get_errno()}}")
print("\\n".join(out))
"""


async def test_ptrace_of_the_server_and_of_another_desktop(
    pair: list[LocalEnvironment], tally: Tally
) -> None:
    attacker, victim = pair
    for _ in range(scale()):
        victim_pids = [p.pid for p in victim.desktop.processes()]
        # Inside the attacker: its server (the executor's parent) and the victim's host pids.
        targets = f"[os.getppid(), 1, *{victim_pids!r}]"
        done = await act(attacker, _PTRACE.format(targets=targets))
        assert done.ok, done
        tally.attempt(
            "ptrace attached to the server or another desktop" if "ATTACHED" in done.stdout else None
        )
    assert not tally.escapes, tally.escapes


async def test_setsid_survivor_after_revert_and_close(env_base_dir_security, tally: Tally) -> None:
    config = DesktopConfig(snapshot="blank")
    for _ in range(scale()):
        desktop = LocalDesktop("survivor", env_base_dir_security, config, pool="security-survivor")
        await run_blocking(desktop.start)
        try:
            env = LocalEnvironment(desktop, server_environment(desktop), on_close=_keep)
            await spawn_daemon(env, "(setsid sleep 1000 &) ; trap '' TERM HUP; exec sleep 1000")
            before = {p.pid for p in desktop.processes()}
            assert await wait_process(desktop, "sleep")
            await env.revert()
            survived = before & {p.pid for p in desktop.processes()}
            await spawn_daemon(env, "exec sleep 1000")
            uid = desktop.uid
            await env.close()
        finally:
            await run_blocking(desktop.close)
        escaped = None
        if survived:
            escaped = f"processes {sorted(survived)} survived revert"
        elif uid_busy(uid):
            escaped = "a process of the closed desktop survived close"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def _keep(_: LocalEnvironment) -> None:
    return None


@pytest.fixture
def env_base_dir_security(tmp_path_factory: pytest.TempPathFactory) -> object:
    return tmp_path_factory.mktemp("security-one")


async def test_upload_and_file_outside_the_home(
    pair: list[LocalEnvironment], canary: Canary, tally: Tally
) -> None:
    env = pair[0]
    info = env.desktop.info()
    for _ in range(scale()):
        name = f"agent-s3-upload-{secrets.token_hex(4)}"
        async with desktop_client(info) as client:
            for target in (
                f"/etc/{name}",
                f"{canary.folder}/{name}",
                f"/usr/local/bin/{name}",
                f"/opt/agent-s3/{name}",
            ):
                try:
                    await client.upload(target, b"#!/bin/sh\necho pwned\n")
                except Exception:
                    pass
            read = [await fetch(client, p) for p in (str(canary.secret), "/etc/shadow", str(info.token_file))]
        escaped = None
        if canary.changed() or any(host_file_exists(p) for p in (f"/etc/{name}", f"/usr/local/bin/{name}")):
            escaped = "an upload wrote a host file"
        elif any(r for r in read):
            escaped = "/file returned a host or root-only file"
        tally.attempt(escaped)
    assert not tally.escapes, tally.escapes


async def test_fork_and_memory_bombs_are_contained(env_base_dir_security, tally: Tally) -> None:
    config = DesktopConfig(snapshot="blank", memory_mib=768, pids_max=256)
    for _ in range(scale()):
        desktop = LocalDesktop("bombed", env_base_dir_security, config, pool="security-bombs")
        await run_blocking(desktop.start)
        try:
            env = LocalEnvironment(desktop, server_environment(desktop), on_close=_keep)
            box = env.sandbox()
            assert box is not None
            fork = asyncio.ensure_future(
                box.run("bash", "bomb() { bomb | bomb & }; bomb; sleep 20", timeout=8)
            )
            peak = 0
            for _ in range(40):
                await asyncio.sleep(0.1)
                peak = max(peak, len(desktop.processes()))
            await fork
            memory = await box.run(
                "python", "x = b'x' * (2 * 1024**3)\nprint('ALLOCATED', len(x))", timeout=60
            )
            probe = await asyncio.create_subprocess_exec("true")
            host_ok = await probe.wait() == 0
            alive_after = desktop.problem()
            await env.close()
        finally:
            await run_blocking(desktop.close)
        escaped = None
        if peak > config.pids_max:
            escaped = f"{peak} processes in a desktop limited to {config.pids_max}"
        elif "ALLOCATED" in memory.stdout:
            escaped = "2 GiB allocated in a desktop limited to 768 MiB"
        elif not host_ok:
            escaped = "the host could not start a process"
        tally.attempt(escaped)
        assert alive_after is None or "exited" in alive_after
    assert not tally.escapes, tally.escapes
