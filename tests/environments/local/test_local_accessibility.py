"""The accessibility tree of a spreadsheet in OSWorld's extent: the cells on screen.

OSWorld's server walks a Calc table over the cells that are showing (row by row, from the
first showing column), where a plain walk stops at the first 1,024 children (part of row 1).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from environments.local import DesktopConfig, LocalDesktop, desktop_client
from environments.local.spawner import run_blocking

pytestmark = [pytest.mark.desktop, pytest.mark.integration]


async def test_calc_lists_the_visible_cells_row_by_row(env_base_dir: Path) -> None:
    desktop = LocalDesktop("a11y-calc", env_base_dir, DesktopConfig(snapshot="calc", spare=False), pool="tests-a11y")
    try:
        await run_blocking(desktop.start)
        async with desktop_client(desktop.info(), timeout=180) as client:
            await client.execute(["bash", "-c", "sleep 2"])  # Calc's first paint after its window shows
            xml = await client.accessibility_tree()
    finally:
        await run_blocking(desktop.close)
    assert xml is not None
    tree = ET.fromstring(xml)
    tables = [t for t in tree.iter("table") if any(c.tag == "table-cell" for c in t)]
    assert tables, "no spreadsheet table in the tree"
    names = [cell.get("name") or "" for cell in tables[0] if cell.tag == "table-cell"]
    rows = {int(m.group(2)) for m in (re.fullmatch(r"([A-Z]+)(\d+)", n) for n in names) if m}
    columns = {m.group(1) for m in (re.fullmatch(r"([A-Z]+)(\d+)", n) for n in names) if m}
    # A maximized 1920x1080 Calc shows some 20-30 columns and 40-60 rows from A1; nothing off screen.
    assert names[0] == "A1" and len(rows) >= 20 and len(columns) >= 10, (names[:5], len(names))
    assert len(names) == len(rows) * len(columns), "the rows are not all the same visible columns"
    assert "A1000" not in names and "ZZ1" not in names
