"""``python -m environments.tasks [--json] [--per-task] [--network|--offline] [--host] [--platform P] DIR ...``:
which tasks of OSWorld-style folders run, on OSWorld's VM image and on this machine.

"This machine" is what its local desktops offer a task: one desktop is started and asked
(`environments.local.probe`: its PATH, its python's modules, its default apps); ``--host``
asks this host instead (for a machine that cannot start desktops).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from core.protocols import EnvError
from environments.tasks.errors import TaskFileError
from environments.tasks.loader import iter_task_files, load_task
from environments.tasks.support import HOST_FACTS, installed_here, needs, support_report

#: Where OSWorld's tasks download their files from; reaching it means the tasks' downloads can work.
_PROBE = ("huggingface.co", 443)


def _online(timeout: float = 3.0) -> bool:
    """Whether this machine reaches the tasks' file host (name lookup included, bounded)."""
    result: list[bool] = []

    def probe() -> None:
        try:
            socket.create_connection(_PROBE, timeout=timeout).close()
            result.append(True)
        except OSError:
            result.append(False)

    worker = threading.Thread(target=probe, daemon=True)
    worker.start()
    worker.join(timeout + 1)
    return bool(result and result[0])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m environments.tasks",
                                     description="Coverage of OSWorld task folders against OSWorld's own package.")
    parser.add_argument("dirs", nargs="*", metavar="EXAMPLES_DIR")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--per-task", action="store_true", help="list every refusal of every task")
    net = parser.add_mutually_exclusive_group()
    net.add_argument("--network", dest="network", action="store_true", default=None,
                     help="count this machine as able to download the tasks' files")
    net.add_argument("--offline", dest="network", action="store_false", help="count this machine as offline")
    parser.add_argument("--host", action="store_true",
                        help="answer for this host's programs and apps instead of a local desktop's")
    parser.add_argument("--platform", choices=("ubuntu", "windows"), default=None,
                        help="the tasks' operating system (default: windows for a folder named like "
                             "OSWorld's examples_windows, else ubuntu)")
    args = parser.parse_args(argv)
    if not args.dirs:
        print("usage: python -m environments.tasks [--json] [--per-task] [--network|--offline] "
              "EXAMPLES_DIR [EXAMPLES_DIR ...]", file=sys.stderr)
        return 2
    tasks = []
    for folder in args.dirs:
        for domain, path in iter_task_files(folder):
            try:
                tasks.append(load_task(path, domain))
            except TaskFileError as exc:
                print(f"skipped: {exc}", file=sys.stderr)
    network = _online() if args.network is None else args.network
    platform = args.platform or ("windows" if all("windows" in Path(d).name for d in args.dirs) else "ubuntu")
    installed: Callable[[str], bool] = installed_here
    facts = HOST_FACTS
    if not args.host:
        from environments.local.probe import DESKTOP_FACTS, probe_desktop

        wanted = set().union(*(needs(t) for t in tasks)) if tasks else set()
        try:
            answers = asyncio.run(probe_desktop(wanted))
        except EnvError as exc:
            print(f"error: cannot start a local desktop to ask what it offers ({exc}); "
                  "run as root with the desktop packages (scripts/setup.sh), or pass --host", file=sys.stderr)
            return 2
        installed, facts = answers.__getitem__, DESKTOP_FACTS
    report = support_report(tasks, installed=installed, network=network, platform=platform, answered_for=facts)
    print(json.dumps(report.to_json(), indent=1) if args.json else report.format(per_task=args.per_task))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
