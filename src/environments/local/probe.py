"""What a local desktop offers a task, asked inside one: its PATH, its Python, its default apps.

The support report (`environments.tasks.support`) counts what runs *here*; here is a local
desktop, not the host that starts it (the host may have a ``python`` or a browser the
desktop does not show, and the other way round). `probe_desktop` starts one blank desktop
(no network, no spare), asks it everything in one command as its own account, and stops it:

- ``NAME``: a program on the desktop's PATH (or the Debian equivalent its server starts in
  its place, `app_names.EQUIVALENTS`) that works there: systemd's tools (`SYSTEMD_TOOLS`)
  count only where systemd runs, which is never inside a desktop;
- ``opener:<mime type>``: an application the desktop opens that type of file with
  (``xdg-mime query default``, which OSWorld's ``default_video_player`` getter reads too);
- ``module:<name>``: a module the desktop's ``python`` imports (``python -c`` of tasks and
  of OSWorld's controller).
"""

from __future__ import annotations

import json
import shlex
import tempfile
from collections.abc import Iterable
from pathlib import Path

from environments.server.app_names import EQUIVALENTS
from environments.tasks.support import SYSTEMD_TOOLS

from .desktop import DesktopConfig, LocalDesktop
from .server_env import desktop_client
from .spawner import run_blocking

__all__ = ["DESKTOP_FACTS", "probe_desktop"]

#: What the report says it answered for.
DESKTOP_FACTS = "a local desktop (blank snapshot, asked inside as its account)"
_MODULES = (
    "import importlib.util, json, sys\n"
    "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None]))\n"
)


def _script(programs: list[str], mimes: list[str], modules: list[str]) -> str:
    lines = []
    for program in programs:
        names = " ".join(shlex.quote(n) for n in [program, *([EQUIVALENTS[program]] if program in EQUIVALENTS else [])])
        works = "[ -d /run/systemd/system ] && " if program in SYSTEMD_TOOLS else ""
        lines.append(f"for n in {names}; do {works}command -v \"$n\" >/dev/null 2>&1 && {{ echo {shlex.quote(program)}; break; }}; done")
    for mime in mimes:
        quoted = shlex.quote(mime)
        lines.append(f'[ -n "$(xdg-mime query default {quoted} 2>/dev/null)" ] && echo opener:{quoted}')
    if modules:
        lines.append(f"echo modules:$(python -c {shlex.quote(_MODULES)} {' '.join(shlex.quote(m) for m in modules)})")
    lines.append("true")
    return "\n".join(lines)


async def probe_desktop(needs: Iterable[str], *, base_dir: Path | None = None) -> dict[str, bool]:
    """Whether a local desktop has each need (see the module); starts and stops one desktop.

    Raises `core.protocols.EnvError` when no desktop can start here (not root, no bubblewrap...)."""
    wanted = sorted(set(needs))
    programs = [n for n in wanted if ":" not in n]
    mimes = [n.removeprefix("opener:") for n in wanted if n.startswith("opener:")]
    modules = [n.removeprefix("module:") for n in wanted if n.startswith("module:")]
    with tempfile.TemporaryDirectory(prefix="agent-s3-probe-", dir=base_dir) as folder:
        config = DesktopConfig(snapshot="blank", spare=False, network="off", accessibility=False)
        desktop = LocalDesktop("probe", Path(folder), config, pool="probe")
        await run_blocking(desktop.start)
        try:
            async with desktop_client(desktop.info(), timeout=120) as client:
                done = await client.execute(["bash", "-c", _script(programs, mimes, modules)], timeout=120)
        finally:
            await run_blocking(desktop.close)
    found: set[str] = set()
    for line in done.stdout.splitlines():
        if line.startswith("modules:"):
            found |= {f"module:{m}" for m in json.loads(line.removeprefix("modules:") or "[]")}
        elif line:
            found.add(line)
    return {need: need in found for need in wanted}
