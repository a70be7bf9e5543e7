"""Metrics over strings and text files: exact match, include/exclude, line rules, text and CSV files."""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

from environments.tasks.metrics.registry import metric

__all__ = ["check_include_exclude", "check_list", "compare_csv", "compare_text_file", "exact_match"]


def _read(path: str | None) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


@metric("exact_match")
def exact_match(result: Any, rules: dict[str, Any]) -> float:
    """1 iff the result equals `rules["expected"]` exactly (a command's output keeps its newline)."""
    return float(result is not None and result == rules["expected"])


@metric("check_include_exclude")
def check_include_exclude(result: Any, rules: dict[str, Any]) -> float:
    """1 iff every `include` substring is in the result and no `exclude` substring is."""
    if result is None:
        return 0.0
    text = str(result)
    included = all(s in text for s in rules.get("include", []))
    excluded = not any(s in text for s in rules.get("exclude", []))
    return float(included and excluded)


@metric("check_list")
def check_list(result: str | None, rules: dict[str, Any]) -> float:
    """For a text file: each `expect` regex matches some line, no `unexpect` regex matches any."""
    text = _read(result)
    if text is None:
        return 0.0
    lines = text.splitlines()
    for pattern in rules.get("expect", []):
        if not any(re.search(pattern, line) for line in lines):
            return 0.0
    for pattern in rules.get("unexpect", []):
        if any(re.search(pattern, line) for line in lines):
            return 0.0
    return 1.0


def _normalise(text: str, ignore_blanks: bool, ignore_case: bool) -> str:
    if ignore_blanks:
        text = re.sub(r"\s+", " ", text).strip()
    if ignore_case:
        text = text.lower()
    return text


@metric("compare_text_file", options=("ignore_blanks", "ignore_case"))
def compare_text_file(
    actual: str | None, expected: str | None, ignore_blanks: bool = False, ignore_case: bool = False
) -> float:
    """1 iff the two text files are equal (after collapsing whitespace / case if asked)."""
    a, e = _read(actual), _read(expected)
    if a is None or e is None:
        return 0.0
    return float(_normalise(a, ignore_blanks, ignore_case) == _normalise(e, ignore_blanks, ignore_case))


@metric("compare_csv", options=("ignore_case",))
def compare_csv(actual: str | None, expected: str | None, ignore_case: bool = False) -> float:
    """1 iff both CSV files hold the same rows of cells (quoting and line endings aside)."""
    a, e = _read(actual), _read(expected)
    if a is None or e is None:
        return 0.0

    def rows(text: str) -> list[list[str]]:
        parsed = [[c.strip() for c in row] for row in csv.reader(text.splitlines())]
        while parsed and not any(parsed[-1]):
            parsed.pop()
        return [[c.lower() for c in row] for row in parsed] if ignore_case else parsed

    return float(rows(a) == rows(e))
