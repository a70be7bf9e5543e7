"""The content of the local suite's input and gold files, and a generator that writes them.

The files under ``src/environments/tasks/suite/files/`` are made from this data
(``python tests/environments/tasks/tasks_suite_data.py`` rewrites them: text directly,
xlsx with openpyxl, docx by converting text with LibreOffice); a test checks the committed
files still hold exactly this content.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import openpyxl

FILES = Path(__file__).resolve().parents[3] / "src" / "environments" / "tasks" / "suite" / "files"

TEXT: dict[str, str] = {
    "mousepad-append-line/groceries.txt": "eggs\nbread\nbutter\n",
    "mousepad-append-line/groceries_gold.txt": "eggs\nbread\nbutter\napples\n",
    "mousepad-fix-typos/letter.txt": "Dear Sam,\nThank you for teh invitation.\nI wil be there on Saturday.\n",
    "mousepad-fix-typos/letter_gold.txt": "Dear Sam,\nThank you for the invitation.\nI will be there on Saturday.\n",
    "mousepad-save-as/agenda_gold.txt": "Meeting at 10 in room 4\n",
}

SHEETS: dict[str, dict[str, list[list[object]]]] = {
    "calc-sum-total/budget.xlsx": {
        "Budget": [
            ["Item", "Cost"],
            ["Rent", 1200],
            ["Power", 85.5],
            ["Water", 40],
            ["Internet", 39.99],
            ["Food", 410],
            ["Total", None],
        ]
    },
    "calc-sum-total/budget_gold.xlsx": {
        "Budget": [
            ["Item", "Cost"],
            ["Rent", 1200],
            ["Power", 85.5],
            ["Water", 40],
            ["Internet", 39.99],
            ["Food", 410],
            ["Total", 1775.49],
        ]
    },
    "calc-amount-column/orders.xlsx": {
        "Orders": [
            ["Product", "Price", "Qty"],
            ["Pencil", 0.5, 12],
            ["Folder", 2.25, 4],
            ["Stapler", 7.8, 1],
            ["Tape", 1.2, 5],
        ]
    },
    "calc-amount-column/orders_gold.xlsx": {
        "Orders": [
            ["Product", "Price", "Qty", "Amount"],
            ["Pencil", 0.5, 12, 6],
            ["Folder", 2.25, 4, 9],
            ["Stapler", 7.8, 1, 7.8],
            ["Tape", 1.2, 5, 6],
        ]
    },
    "calc-fix-value/stock.xlsx": {
        "Stock": [["Item", "Count"], ["almonds", 120], ["cashews", 75], ["walnuts", 4], ["pecans", 33]]
    },
    "calc-fix-value/stock_gold.xlsx": {
        "Stock": [["Item", "Count"], ["almonds", 120], ["cashews", 75], ["walnuts", 48], ["pecans", 33]]
    },
}

DOCS: dict[str, list[str]] = {
    "writer-retitle/memo.docx": [
        "Draft memo",
        "The team meets on Friday at nine.",
        "Bring the printed slides.",
    ],
    "writer-retitle/memo_gold.docx": [
        "Final memo",
        "The team meets on Friday at nine.",
        "Bring the printed slides.",
    ],
    "writer-page-break/report.docx": ["Summary", "All measurements passed.", "Appendix", "Raw data follows."],
    "writer-page-break/report_gold.docx": [
        "Summary",
        "All measurements passed.",
        "Appendix",
        "Raw data follows.",
    ],
}


def _write_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> None:
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    book.save(path)


def _write_docx(path: Path, paragraphs: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="suite-docx-") as tmp:
        source = Path(tmp) / f"{path.stem}.txt"
        source.write_text("\n".join(paragraphs) + "\n")
        subprocess.run(
            [
                "soffice",
                "--headless",
                f"-env:UserInstallation={(Path(tmp) / 'profile').as_uri()}",
                "--convert-to",
                "docx:MS Word 2007 XML",
                "--outdir",
                tmp,
                str(source),
            ],
            env={"HOME": tmp, "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            check=True,
            capture_output=True,
            timeout=120,
        )
        shutil.copyfile(Path(tmp) / f"{path.stem}.docx", path)


def build(root: Path = FILES) -> None:
    """Write every fixture under `root`."""
    for name, text in TEXT.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, sheets in SHEETS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        _write_xlsx(root / name, sheets)
    for name, paragraphs in DOCS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        _write_docx(root / name, paragraphs)


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else FILES)
