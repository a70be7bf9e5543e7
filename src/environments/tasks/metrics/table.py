"""Spreadsheet metrics: `compare_table` over cell values of xlsx (openpyxl) and csv files.

Values are read as saved (``data_only``: a formula counts by the value LibreOffice cached),
trailing empty rows and columns are ignored, and numbers compare with a small tolerance so
``3`` equals ``3.0``. Of OSWorld's rule types, `sheet_data`, `sheet_name` and `check_cell` on
the `value` property are implemented; any other rule makes the task unsupported.
"""

from __future__ import annotations

import csv
import math
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from environments.tasks.metrics.registry import metric

__all__ = ["Workbook", "compare_table", "read_workbook"]

_SUPPORTED_RULES = {"sheet_data", "sheet_name", "check_cell"}
_CELL_METHODS = ("eq", "ne", "lt", "le", "gt", "ge")
_COORD = re.compile(r"^([A-Z]+)(\d+)$")
#: What openpyxl raises for a file that is not an xlsx workbook.
_UNREADABLE = (zipfile.BadZipFile, KeyError, ValueError, OSError)


@dataclass
class Workbook:
    """Sheet names in order and each sheet's rows of values, trailing blanks trimmed."""

    names: list[str]
    sheets: list[list[list[Any]]]

    def sheet(self, ref: int | str) -> list[list[Any]] | None:
        if isinstance(ref, int):
            return self.sheets[ref] if 0 <= ref < len(self.sheets) else None
        return self.sheets[self.names.index(ref)] if ref in self.names else None


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return value


def _trim(rows: list[list[Any]]) -> list[list[Any]]:
    rows = [[_clean(v) for v in row] for row in rows]
    for row in rows:
        while row and row[-1] is None:
            row.pop()
    while rows and not rows[-1]:
        rows.pop()
    return rows


def read_workbook(path: str | Path) -> Workbook:
    """Load an .xlsx (values as saved) or a .csv (one sheet named after the file)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        with path.open(newline="", encoding="utf-8", errors="replace") as handle:
            rows = [[_number(c) for c in row] for row in csv.reader(handle)]
        return Workbook([path.stem], [_trim(rows)])
    import openpyxl
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        book = openpyxl.load_workbook(path, data_only=True, read_only=True)
    except InvalidFileException as exc:
        raise ValueError(f"{path.name} is not an xlsx workbook: {exc}") from exc
    try:
        sheets = [_trim([list(row) for row in ws.iter_rows(values_only=True)]) for ws in book.worksheets]
        return Workbook(list(book.sheetnames), sheets)
    finally:
        book.close()


def _number(text: str) -> Any:
    try:
        return float(text) if text.strip() else None
    except ValueError:
        return text


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _rows_equal(a: list[list[Any]], b: list[list[Any]]) -> bool:
    if len(a) != len(b):
        return False
    for row_a, row_b in zip(a, b, strict=True):
        if len(row_a) != len(row_b) or not all(_same(x, y) for x, y in zip(row_a, row_b, strict=True)):
            return False
    return True


def _sheet(ref: int | str, result: Workbook, expected: Workbook | None) -> list[list[Any]] | None:
    """OSWorld's sheet references: an int (result's index), RI<n>/EI<n>, RN<name>/EN<name>."""
    if isinstance(ref, int):
        return result.sheet(ref)
    book = result if ref.startswith("R") else expected
    if book is None:
        return None
    key: int | str = int(ref[2:]) if ref[1] == "I" else ref[2:]
    return book.sheet(key)


def _cell(rows: list[list[Any]], coordinate: str) -> Any:
    match = _COORD.match(coordinate.upper())
    if match is None:
        raise ValueError(f"bad cell coordinate {coordinate!r}")
    col = 0
    for ch in match.group(1):
        col = col * 26 + ord(ch) - 64
    r, c = int(match.group(2)) - 1, col - 1
    return rows[r][c] if r < len(rows) and c < len(rows[r]) else None


def _check(value: Any, method: str, ref: Any) -> bool:
    if method.startswith("approx:"):
        tolerance = float(method.split(":", 1)[1])
        try:
            return abs(float(value) - float(ref)) <= tolerance
        except (TypeError, ValueError):
            return False
    if method == "eq":
        return _same(value, ref)
    if method == "ne":
        return not _same(value, ref)
    try:
        return {"lt": value < ref, "le": value <= ref, "gt": value > ref, "ge": value >= ref}[method]
    except TypeError:
        return False


def _rule_unsupported(options: dict[str, Any]) -> str | None:
    for rule in options.get("rules", []):
        kind = rule.get("type")
        if kind not in _SUPPORTED_RULES:
            return f"rule type {kind!r} not supported"
        if kind == "check_cell":
            for prop, spec in rule.get("props", {}).items():
                method = str(spec.get("method", ""))
                if prop != "value":
                    return f"check_cell property {prop!r} not supported"
                if method not in _CELL_METHODS and not method.startswith("approx:"):
                    return f"check_cell method {method!r} not supported"
    return None


@metric("compare_table", options=("rules",), check=_rule_unsupported)
def compare_table(
    result: str | None, expected: str | None = None, rules: list[dict[str, Any]] | None = None
) -> float:
    """1 iff every rule holds; with no rules, 1 iff both workbooks hold the same sheets and values."""
    if result is None or not Path(result).is_file():
        return 0.0
    try:
        got = read_workbook(result)
    except _UNREADABLE:
        return 0.0  # the agent left something that is not a workbook: a failed task, not an error
    want = read_workbook(expected) if expected is not None else None
    if not rules:
        if want is None:
            return 0.0
        same = got.names == want.names and all(
            _rows_equal(a, b) for a, b in zip(got.sheets, want.sheets, strict=True)
        )
        return float(same)
    for rule in rules:
        kind = rule["type"]
        if kind == "sheet_name":
            if want is None or got.names != want.names:
                return 0.0
        elif kind == "sheet_data":
            a, b = _sheet(rule["sheet_idx0"], got, want), _sheet(rule["sheet_idx1"], got, want)
            if a is None or b is None or not _rows_equal(a, b):
                return 0.0
        elif kind == "check_cell":
            rows = _sheet(rule["sheet_idx"], got, want)
            if rows is None:
                return 0.0
            value = _cell(rows, str(rule["coordinate"]))
            for spec in rule.get("props", {}).values():
                if not _check(value, str(spec["method"]), spec.get("ref")):
                    return 0.0
        else:
            raise ValueError(f"rule type {kind!r} not supported")
    return 1.0
