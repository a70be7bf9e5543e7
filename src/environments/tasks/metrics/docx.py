"""Word-processing metrics over .docx files, read with the standard library's zip and XML.

Text is taken paragraph by paragraph from ``word/document.xml`` (runs joined, tabs and line
breaks kept), which is what the document comparison needs without a docx library.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from environments.tasks.metrics.registry import metric

__all__ = ["compare_docx_files", "contains_page_break", "docx_paragraphs"]

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


def _document(path: str | Path) -> ElementTree.Element | None:
    try:
        with zipfile.ZipFile(path) as archive:
            return ElementTree.fromstring(archive.read("word/document.xml"))
    except (OSError, KeyError, zipfile.BadZipFile, ElementTree.ParseError):
        return None


def docx_paragraphs(path: str | Path) -> list[str] | None:
    """The text of each body paragraph, or None if `path` is not a readable .docx."""
    root = _document(path)
    if root is None:
        return None
    paragraphs = []
    for para in root.iter(f"{_W}p"):
        parts = []
        for node in para.iter():
            if node.tag == f"{_W}t":
                parts.append(node.text or "")
            elif node.tag == f"{_W}tab":
                parts.append("\t")
            elif node.tag in (f"{_W}br", f"{_W}cr") and node.get(f"{_W}type") in (None, "textWrapping"):
                parts.append("\n")
        paragraphs.append("".join(parts))
    return paragraphs


@metric("compare_docx_files", options=("ignore_blanks", "ignore_case", "ignore_order"))
def compare_docx_files(
    actual: str | None,
    expected: str | None,
    ignore_blanks: bool = False,
    ignore_case: bool = False,
    ignore_order: bool = False,
) -> float:
    """1 iff both documents hold the same paragraphs of text.

    `ignore_blanks` compares the whole text with whitespace runs collapsed (so empty
    paragraphs do not count), `ignore_case` lowercases, `ignore_order` sorts paragraphs.
    """
    if actual is None or expected is None:
        return 0.0
    a, e = docx_paragraphs(actual), docx_paragraphs(expected)
    if a is None or e is None:
        return 0.0
    if ignore_case:
        a, e = [p.lower() for p in a], [p.lower() for p in e]
    if ignore_order:
        a, e = sorted(a), sorted(e)
    if ignore_blanks:
        return float(re.sub(r"\s+", " ", " ".join(a)).strip() == re.sub(r"\s+", " ", " ".join(e)).strip())
    return float(a == e)


@metric("contains_page_break")
def contains_page_break(actual: str | None, rules: dict[str, Any] | None = None) -> float:
    """1 iff the document has page breaks (`rules["page_break_count"]` of them, if given)."""
    if actual is None:
        return 0.0
    root = _document(actual)
    if root is None:
        return 0.0
    breaks = sum(1 for node in root.iter(f"{_W}br") if node.get(f"{_W}type") == "page")
    breaks += sum(
        1 for node in root.iter(f"{_W}pageBreakBefore") if node.get(f"{_W}val") not in ("0", "false")
    )
    wanted = (rules or {}).get("page_break_count")
    return float(breaks == int(wanted)) if wanted is not None else float(breaks > 0)
