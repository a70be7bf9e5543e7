"""The local task suite: OSWorld-format tasks for the local desktops' applications.

Text editing in mousepad, terminal and file-manager work, spreadsheets in LibreOffice Calc
and documents in LibreOffice Writer. Task files live in ``examples/<domain>/<id>.json``, the
list in ``test_local.json``, inputs and gold files in ``files/<id>/``; every path inside a
desktop is written with ``~`` so the tasks run in any home.
"""

from __future__ import annotations

from pathlib import Path

from core.trajectory import Task
from environments.tasks.loader import load_task_list

__all__ = ["SUITE_DIR", "SUITE_LIST", "load_suite"]

SUITE_DIR = Path(__file__).resolve().parent
SUITE_LIST = SUITE_DIR / "test_local.json"


def load_suite() -> list[Task]:
    """Every task of the local suite, in list order."""
    return load_task_list(SUITE_LIST)
