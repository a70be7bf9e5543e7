"""Metrics on small local files: text, CSV, xlsx (openpyxl) and docx, and their option checks."""

from __future__ import annotations

import zipfile
from pathlib import Path

import openpyxl
import pytest

from environments.tasks.metrics import METRICS, unsupported_reason
from environments.tasks.metrics.docx import compare_docx_files, contains_page_break, docx_paragraphs
from environments.tasks.metrics.table import compare_table, read_workbook
from environments.tasks.metrics.text import (
    check_include_exclude,
    check_list,
    compare_csv,
    compare_text_file,
    exact_match,
)

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def _text(path: Path, content: str) -> str:
    path.write_text(content)
    return str(path)


def _xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> str:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return str(path)


def _docx(path: Path, paragraphs: list[str], page_breaks: int = 0) -> str:
    body = "".join(f'<w:p><w:r><w:t xml:space="preserve">{p}</w:t></w:r></w:p>' for p in paragraphs)
    body += '<w:p><w:r><w:br w:type="page"/></w:r></w:p>' * page_breaks
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            "word/document.xml", f'<w:document xmlns:w="{W}"><w:body>{body}</w:body></w:document>'
        )
    return str(path)


def test_exact_match_and_include_exclude() -> None:
    assert exact_match("Directory exists.\n", {"expected": "Directory exists.\n"}) == 1.0
    assert exact_match("Directory exists.", {"expected": "Directory exists.\n"}) == 0.0
    assert exact_match(None, {"expected": None}) == 0.0
    rules = {"include": ["alpha", "beta"], "exclude": ["error"]}
    assert check_include_exclude("alpha then beta", rules) == 1.0
    assert check_include_exclude("alpha only", rules) == 0.0
    assert check_include_exclude("alpha beta error", rules) == 0.0
    assert check_include_exclude(None, rules) == 0.0


def test_compare_text_file_options(tmp_path: Path) -> None:
    gold = _text(tmp_path / "gold.txt", "Hello  World\nsecond line\n")
    assert compare_text_file(_text(tmp_path / "a.txt", "Hello  World\nsecond line\n"), gold) == 1.0
    spaced = _text(tmp_path / "b.txt", "Hello World\n\nsecond   line")
    assert compare_text_file(spaced, gold) == 0.0
    assert compare_text_file(spaced, gold, ignore_blanks=True) == 1.0
    upper = _text(tmp_path / "c.txt", "HELLO  WORLD\nSECOND LINE\n")
    assert compare_text_file(upper, gold) == 0.0 and compare_text_file(upper, gold, ignore_case=True) == 1.0
    assert compare_text_file(None, gold) == 0.0
    assert compare_text_file(str(tmp_path / "missing.txt"), gold) == 0.0


def test_check_list_regexes(tmp_path: Path) -> None:
    path = _text(tmp_path / "out.txt", "theme: Orchis\nicons: Adwaita\n")
    assert check_list(path, {"expect": ["Orchis$"], "unexpect": ["Yaru"]}) == 1.0
    assert check_list(path, {"expect": ["Yaru"]}) == 0.0
    assert check_list(path, {"unexpect": ["Adw"]}) == 0.0


def test_compare_csv_ignores_quoting_and_trailing_blank_rows(tmp_path: Path) -> None:
    gold = _text(tmp_path / "g.csv", 'name,qty\n"pear",3\n')
    assert compare_csv(_text(tmp_path / "a.csv", "name,qty\r\npear,3\r\n,\r\n"), gold) == 1.0
    assert compare_csv(_text(tmp_path / "b.csv", "name,qty\npear,4\n"), gold) == 0.0


def test_compare_table_whole_workbook(tmp_path: Path) -> None:
    gold = _xlsx(tmp_path / "g.xlsx", {"Data": [["item", "qty"], ["pear", 3], ["fig", 2.5]]})
    same = _xlsx(tmp_path / "s.xlsx", {"Data": [["item", "qty"], ["pear", 3.0], ["fig", 2.5], [None, None]]})
    other = _xlsx(tmp_path / "o.xlsx", {"Data": [["item", "qty"], ["pear", 4], ["fig", 2.5]]})
    renamed = _xlsx(tmp_path / "r.xlsx", {"Sheet1": [["item", "qty"], ["pear", 3], ["fig", 2.5]]})
    assert compare_table(same, gold) == 1.0
    assert compare_table(other, gold) == 0.0
    assert compare_table(renamed, gold) == 0.0
    assert (
        compare_table(renamed, gold, rules=[{"type": "sheet_data", "sheet_idx0": 0, "sheet_idx1": "EI0"}])
        == 1.0
    )
    assert compare_table(renamed, gold, rules=[{"type": "sheet_name"}]) == 0.0
    assert compare_table(None, gold) == 0.0
    assert compare_table(str(tmp_path / "absent.xlsx"), gold) == 0.0


def test_compare_table_scores_a_non_workbook_result_zero(tmp_path: Path) -> None:
    gold = _xlsx(tmp_path / "g.xlsx", {"Data": [["a"]]})
    assert compare_table(_text(tmp_path / "saved.xlsx", "plain text, not a workbook"), gold) == 0.0
    assert compare_table(_text(tmp_path / "saved.ods", "odd"), gold) == 0.0
    with pytest.raises(ValueError):
        read_workbook(_text(tmp_path / "other.ods", "odd"))


def test_compare_table_sheet_names_and_cells(tmp_path: Path) -> None:
    book = _xlsx(tmp_path / "b.xlsx", {"In": [["x"]], "Out": [["total", 191.66671]]})
    gold = _xlsx(tmp_path / "g.xlsx", {"In": [["x"]], "Out": [["total", 191.6667]]})
    cell = {"type": "check_cell", "sheet_idx": "RNOut", "coordinate": "B1"}
    assert (
        compare_table(book, rules=[cell | {"props": {"value": {"method": "approx:0.001", "ref": 191.6667}}}])
        == 1.0
    )
    assert compare_table(book, rules=[cell | {"props": {"value": {"method": "eq", "ref": 191.6667}}}]) == 0.0
    assert (
        compare_table(
            book, rules=[cell | {"coordinate": "A1", "props": {"value": {"method": "eq", "ref": "total"}}}]
        )
        == 1.0
    )
    assert (
        compare_table(
            book, rules=[cell | {"coordinate": "Z9", "props": {"value": {"method": "eq", "ref": "x"}}}]
        )
        == 0.0
    )
    assert (
        compare_table(book, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RNIn", "sheet_idx1": "ENIn"}])
        == 1.0
    )
    assert (
        compare_table(book, gold, rules=[{"type": "sheet_data", "sheet_idx0": "RI1", "sheet_idx1": "EI1"}])
        == 0.0
    )
    assert compare_table(book, gold, rules=[{"type": "sheet_name"}]) == 1.0


def test_csv_reads_as_one_sheet(tmp_path: Path) -> None:
    book = read_workbook(_text(tmp_path / "t.csv", "a,1\nb,2.5\n"))
    assert book.names == ["t"] and book.sheets == [[["a", 1.0], ["b", 2.5]]]


def test_docx_paragraphs_and_compare(tmp_path: Path) -> None:
    gold = _docx(tmp_path / "g.docx", ["Title", "Body text."])
    assert docx_paragraphs(gold) == ["Title", "Body text."]
    assert compare_docx_files(_docx(tmp_path / "a.docx", ["Title", "Body text."]), gold) == 1.0
    assert compare_docx_files(_docx(tmp_path / "b.docx", ["title", "body text."]), gold) == 0.0
    assert compare_docx_files(str(tmp_path / "b.docx"), gold, ignore_case=True) == 1.0
    assert compare_docx_files(_docx(tmp_path / "c.docx", ["Body text.", "Title"]), gold) == 0.0
    assert compare_docx_files(str(tmp_path / "c.docx"), gold, ignore_order=True) == 1.0
    assert (
        compare_docx_files(_docx(tmp_path / "d.docx", ["Title", "", "Body  text."]), gold, ignore_blanks=True)
        == 1.0
    )
    assert compare_docx_files(_text(tmp_path / "e.docx", "not a zip"), gold) == 0.0
    assert docx_paragraphs(str(tmp_path / "e.docx")) is None


def test_contains_page_break(tmp_path: Path) -> None:
    two = _docx(tmp_path / "two.docx", ["a", "b"], page_breaks=2)
    assert contains_page_break(two) == 1.0
    assert contains_page_break(two, {"page_break_count": 2}) == 1.0
    assert contains_page_break(two, {"page_break_count": 1}) == 0.0
    assert contains_page_break(_docx(tmp_path / "none.docx", ["a"])) == 0.0


def test_unsupported_reasons() -> None:
    assert {
        "exact_match",
        "check_include_exclude",
        "compare_text_file",
        "compare_table",
        "compare_docx_files",
    } <= set(METRICS)
    assert unsupported_reason("exact_match", {}) is None
    assert unsupported_reason("no_such_metric", {}) == "no such metric here"
    assert unsupported_reason("compare_text_file", {"fuzzy": True}) == "options fuzzy not supported"
    assert (
        unsupported_reason("compare_table", {"rules": [{"type": "chart"}]})
        == "rule type 'chart' not supported"
    )
    bold = {"rules": [{"type": "check_cell", "props": {"font_bold": {"method": "eq", "ref": True}}}]}
    assert unsupported_reason("compare_table", bold) == "check_cell property 'font_bold' not supported"
    assert unsupported_reason("compare_table", {"rules": [{"type": "sheet_data"}]}) is None


FILE_METRICS = {"compare_text_file", "compare_csv", "compare_table", "compare_docx_files"}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_every_metric_scores_a_missing_result_zero(name: str, tmp_path: Path) -> None:
    """A result getter that found no file gives None; no metric may crash on it or pass it."""
    second = str(tmp_path / "gold") if name in FILE_METRICS else {"expected": "x", "include": ["x"]}
    assert METRICS[name].fn(None, second) == 0.0
