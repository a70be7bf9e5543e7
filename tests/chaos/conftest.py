"""Fixtures of the chaos suite: the `chaos` marker and the figures every scenario prints
as `name: value` lines (also appended to $CHAOS_FIGURES for benchmarks/chaos.py).

The scenarios reuse other areas' test helpers rather than copy them: this folder puts the
runner's and the AWS tests' folders on the import path (runner_helpers, test_wide_desktop,
aws_helpers), and chaos_helpers loads the controller server tests' conftest as
`server_fixtures`."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
for folder in (TESTS / "chaos", TESTS / "runner", TESTS / "aws"):
    if str(folder) not in sys.path:
        sys.path.append(str(folder))

from chaos_helpers import FIGURES_ENV, Figures  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: reliability scenarios (faults, kills, hostile input)")


@pytest.fixture
def figures() -> Iterator[Figures]:
    found = Figures()
    yield found
    text = "".join(line + "\n" for line in found.lines)
    print("\n" + text, end="")
    target = os.environ.get(FIGURES_ENV)
    if target and text:
        with open(target, "a", encoding="utf-8") as sink:
            sink.write(text)
