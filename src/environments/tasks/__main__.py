"""``python -m environments.tasks DIR [DIR ...]``: which tasks of OSWorld-style folders run here."""

from __future__ import annotations

import sys

from environments.tasks.errors import TaskFileError
from environments.tasks.loader import iter_task_files, load_task
from environments.tasks.support import support_report


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m environments.tasks EXAMPLES_DIR [EXAMPLES_DIR ...]", file=sys.stderr)
        return 2
    tasks = []
    for folder in argv:
        for domain, path in iter_task_files(folder):
            try:
                tasks.append(load_task(path, domain))
            except TaskFileError as exc:
                print(f"skipped: {exc}", file=sys.stderr)
    print(support_report(tasks).format())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
