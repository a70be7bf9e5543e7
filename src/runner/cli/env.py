"""`agent-s3 env`: start, list, photograph and stop environments from a shell.

`up` hands the desktops to a detached host process (they outlive the command) and waits
until they are ready; `down` asks the hosts to stop them and checks no process is left.
With ``--env KIND`` (and its settings: ``--image``, ``-c environment.KEY=VALUE``) `up` keeps
environments of any registered kind running (`environments.hosting`), e.g. VMs under QEMU;
`ls` and `down` cover those too.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from core.atomic import write_bytes_atomic
from core.config import ConfigError
from core.protocols import EnvError
from environments.capacity import desktops_that_fit, machine_room
from environments.hosting import hosted_dir, hosted_records, stop_hosted
from environments.kinds import describe_kinds
from environments.local import DesktopInfo, default_base_dir
from environments.local.host import HostRecord, host_records, hosts_dir, request_stop
from environments.local.kind import LocalSettings
from environments.local.procs import alive
from environments.local.server_env import desktop_client
from environments.local.snapshot import SNAPSHOTS
from environments.local.sweep import reap_desktop
from environments.local.watchdog import reap_pool

from ..config import load_run_config
from .errors import fail
from .options import Image, env_option

__all__ = ["app"]

app = typer.Typer(help="Local virtual desktops: up, ls, screenshot, down.", no_args_is_help=True)

BaseDir = Annotated[
    Path | None,
    typer.Option(
        "--base-dir",
        help="Where desktops keep their state (default $AGENT_S3_ENV_DIR or /tmp/agent-s3/envs).",
    ),
]


def _base(base_dir: Path | None) -> Path:
    return base_dir if base_dir is not None else default_base_dir()


def _desktops(base: Path) -> list[tuple[HostRecord, DesktopInfo]]:
    """(host record, desktop) pairs of every live host."""
    return [(rec, d) for rec in host_records(base) for d in rec.desktops]


def _health(desktop: DesktopInfo) -> str:
    if not alive(desktop.pid):
        return "dead: X server gone"
    if desktop.socket is None:
        return "ok (no server)"
    try:
        with socket.socket(socket.AF_UNIX) as probe:
            probe.settimeout(1.0)
            probe.connect(desktop.socket or "")
            return "ok"
    except OSError:
        return "dead: server not answering"


@app.command()
def up(
    n: Annotated[int, typer.Option("-n", "--count", min=1, help="How many desktops to start.")] = 1,
    snapshot: Annotated[str, typer.Option(help=f"Snapshot to start from: {', '.join(SNAPSHOTS)}.")] = "blank",
    base_dir: BaseDir = None,
    timeout: Annotated[float | None, typer.Option(help="Seconds to wait for the desktops (default 120; "
                                                       "a kind's own boot timeout with --env).")] = None,
    env: Annotated[str | None, env_option(help="Keep environments of this kind running instead of local "
                                               "desktops: " + describe_kinds() + ".")] = None,
    image: Image = None,
    config: Annotated[list[str] | None, typer.Option("-c", "--config", help="environment.KEY=VALUE settings of --env's kind.")] = None,
) -> None:
    """Start N desktops (or N environments of --env's kind) that keep running after this command returns."""
    if env is not None:
        _up_hosted(env, image, config or [], n, _base(base_dir), timeout)
        return
    timeout = 120.0 if timeout is None else timeout
    if snapshot not in SNAPSHOTS:
        raise fail(f"unknown snapshot {snapshot!r}; use one of: {', '.join(SNAPSHOTS)}", code=1)
    budget = LocalSettings()
    fit = desktops_that_fit(machine_room(), memory_mib=budget.desktop_memory_mib, per_core=budget.desktops_per_core)
    if fit < n:  # desktops asked for by count, not for rollouts that could queue
        raise fail(f"{n} desktops do not fit on this machine now (memory and cores): "
                   f"start at most {fit} with -n {fit}")
    base = _base(base_dir)
    folder = hosts_dir(base)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / f"host-{os.getpid()}-{time.monotonic_ns()}.log"
    environ = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ")}
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with log.open("wb") as out:
        host = subprocess.Popen(
            [sys.executable, "-m", "environments.local.host", "--base-dir", str(base), "--count", str(n),
             "--snapshot", snapshot],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=environ, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mine = [r for r in host_records(base) if r.host_pid == host.pid]
        if mine:
            log.unlink(missing_ok=True)
            for d in mine[0].desktops:
                typer.echo(f"{d.name}\tdisplay {d.display}\tsocket {d.socket}")
            return
        if host.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise fail(f"desktops did not start: {tail[0]} (log: {log})", code=1)
        time.sleep(0.1)
    host.terminate()
    raise fail(f"desktops did not start within {timeout:g} s; see {log}", code=1)


@app.command("ls")
def list_desktops(base_dir: BaseDir = None) -> None:
    """Show every running desktop (name, display, socket, X server pid, health) and every
    environment kept running by `env up --env KIND`."""
    base = _base(base_dir)
    rows = _desktops(base)
    hosted = hosted_records(base)
    if not rows and not hosted:
        typer.echo("no desktops running; start some with `agent-s3 env up -n 2`")
        return
    if rows:
        typer.echo("NAME\tDISPLAY\tSOCKET\tPID\tHEALTH")
    for _, d in rows:
        typer.echo(f"{d.name}\t{d.display}\t{d.socket}\t{d.pid}\t{_health(d)}")
    if hosted:
        typer.echo("NAME\tKIND\tADDRESS\tHOST PID")
    for record in hosted:
        for e in record.environments:
            typer.echo(f"{e['name']}\t{record.kind}\t{e.get('address') or '-'}\t{record.pid}")


@app.command()
def screenshot(
    name: Annotated[str, typer.Argument(help="Desktop name, as shown by `env ls`.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="PNG file to write.")],
    base_dir: BaseDir = None,
) -> None:
    """Save a PNG of a desktop's screen (through its controller server)."""
    found = [d for _, d in _desktops(_base(base_dir)) if d.name == name]
    if not found:
        raise fail(f"no running desktop named {name!r}; see `agent-s3 env ls`", code=1)
    desktop = found[0]
    if desktop.socket is None:
        raise fail(f"desktop {name} runs no controller server", code=1)

    async def grab() -> bytes:
        async with desktop_client(desktop) as client:
            return await client.screenshot()

    try:
        data = asyncio.run(grab())
    except Exception as exc:
        raise fail(f"could not take a screenshot of {name}: {exc}", code=1) from None
    write_bytes_atomic(output, data)  # a device or FIFO is written through, never replaced
    typer.echo(f"{output} ({len(data)} bytes)")


@app.command()
def down(
    name: Annotated[str | None, typer.Argument(help="Desktop to stop.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Stop every desktop.")] = False,
    base_dir: BaseDir = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait before killing outright.")] = 20.0,
) -> None:
    """Stop one desktop (NAME) or all of them (--all), leaving no process behind."""
    if (name is None) == (not all_):
        raise fail("name one desktop or pass --all", code=1)
    base = _base(base_dir)
    for record in hosted_records(base):  # environments of other kinds: their host closes all of its pool
        if all_ or any(e["name"] == name for e in record.environments):
            if not stop_hosted(record, timeout=max(timeout, 60.0)):
                raise fail(f"the host of {record.kind} environments (pid {record.pid}) did not stop", code=1)
            typer.echo(f"stopped {', '.join(e['name'] for e in record.environments)}")
            if not all_:
                return
    records = host_records(base)
    targets: list[tuple[HostRecord, str | None]]
    if all_:
        targets = [(rec, None) for rec in records]
    else:
        owners = [rec for rec in records if any(d.name == name for d in rec.desktops)]
        if not owners:
            raise fail(f"no running desktop named {name!r}; see `agent-s3 env ls`", code=1)
        targets = [(owners[0], name)]
    for rec, one in targets:
        _stop(base, rec, one, timeout)
        typer.echo(f"stopped {one or 'all desktops of pool ' + rec.pool}")


def _up_hosted(kind: str, image: str | None, config: list[str], n: int, base: Path, timeout: float | None) -> None:
    """`n` environments of `kind` held by a detached host until `env down`."""
    try:
        sources: list[Any] = [{"environment": {"kind": kind, **({"image": image} if image else {})}}, *config]
        settings = load_run_config(sources).environment
        settings.check()
    except (ConfigError, EnvError, ValueError) as e:
        raise fail(str(e), code=1) from None
    folder = hosted_dir(base)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    log = folder / f"host-{os.getpid()}-{time.monotonic_ns()}.log"
    environ = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "AGENT_S3_CACHE",
                                                              "AGENT_S3_ENV_DIR")}
    environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    with log.open("wb") as out:
        host = subprocess.Popen(
            [sys.executable, "-m", "environments.hosting", "--settings", settings.model_dump_json(), "--count", str(n),
             "--base", str(base)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=environ, start_new_session=True,
        )  # fmt: skip
    limit = timeout if timeout is not None else float(getattr(settings, "boot_timeout", 120.0)) + 120.0
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        mine = [r for r in hosted_records(base) if r.pid == host.pid]
        if mine:
            log.unlink(missing_ok=True)
            for held in mine[0].environments:
                typer.echo(f"{held['name']}\t{kind}\t{held.get('address') or '-'}")
            return
        if host.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise fail(f"{kind} environments did not start: {tail[0]} (log: {log})", code=1)
        time.sleep(0.2)
    host.terminate()
    raise fail(f"{kind} environments did not start within {limit:g} s; see {log}", code=1)


def _stop(base: Path, rec: HostRecord, name: str | None, timeout: float) -> None:
    pool, pid = rec.pool, rec.host_pid
    desktops = [d for d in rec.desktops if name is None or d.name == name]
    if name is not None and len(rec.desktops) > 1:
        request_stop(base, pool, name)
        folders = [base / "desktops" / d.name for d in desktops]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            listed = any(d.name == name for r in host_records(base) for d in r.desktops)
            if not listed and not any(f.exists() for f in folders):
                return
            time.sleep(0.1)
        for folder in folders:
            reap_desktop(folder)  # by pid namespace and cgroup: nothing it started survives
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.1)
    if alive(pid):
        os.kill(pid, signal.SIGKILL)
    reap_pool(pool, base / "desktops")
    rec.state_file.unlink(missing_ok=True)
