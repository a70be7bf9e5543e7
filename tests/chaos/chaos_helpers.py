"""Helpers of the chaos scenarios: the figures they print, the scale the benchmark sets,
and the controller server tests' helpers loaded under their own name."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).resolve().parents[1]
#: Environment variable naming a file the figures are appended to.
FIGURES_ENV = "CHAOS_FIGURES"
#: Environment variable scaling the scenarios' counts up (benchmarks/chaos.py sets it).
SCALE_ENV = "CHAOS_SCALE"


def load_server_fixtures() -> ModuleType:
    """The controller server tests' helpers (start_xvfb, start_server, stop) as a module."""
    return load_conftest("environments/server", "server_fixtures")


def load_conftest(area: str, name: str) -> ModuleType:
    """Another area's conftest.py as module `name`: its helpers, and fixtures a test module
    can bind to its own names (which makes them that module's fixtures)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TESTS / area / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def scale() -> int:
    """How many times larger the benchmark's counts are than CI's (1 in tests)."""
    return max(int(os.environ.get(SCALE_ENV, "1")), 1)


class Figures:
    """Collects `name: value` lines; printed at the end of the test and appended to a file."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, name: str, value: object) -> None:
        self.lines.append(f"{name}: {value}")
