"""Where log lines go while a command runs: into the run folder, and a few onto the terminal.

Everything at INFO and above — the project's lines, OSWorld's own (desktop-env's
``desktopenv.*`` loggers) and what OSWorld's code prints from the threads it runs in
(`OFFICIAL_THREAD`; its metrics print their inputs) — goes to the run folder's ``run.log``
(0600, credentials in URLs removed), tracebacks included. The terminal shows only the
project's warnings and errors, one line each (the traceback stays in the file); OSWorld's
lines, and Python's warnings (the deprecations of libraries its metrics import), reach it only
when asked for (``-v``). Left alone, Python would print every warning of
every logger onto the terminal, tracebacks and OSWorld's chatter included, and keep none.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from core.config import redact_urls
from environments.tasks.steps import OFFICIAL_THREAD

__all__ = ["OFFICIAL_LOGGER", "RUN_LOG", "official_output_to_log", "run_log"]

#: The log file in a run folder.
RUN_LOG = "run.log"
#: The root of OSWorld's own loggers (desktop-env 1.0.2 names them ``desktopenv.*``).
OFFICIAL_LOGGER = "desktopenv"
#: Loggers that log at INFO into the file while a command runs, unless a level was set on
#: them (others, e.g. HTTP clients, keep the root's WARNING).
_FILED = (OFFICIAL_LOGGER, "agent_s3", "aws", "bjudge", "core", "environments", "gprm", "runner", "themis")
#: Python's warnings (deprecations of the libraries OSWorld's metrics import), as log lines.
_PY_WARNINGS = "py.warnings"
#: What OSWorld's code prints, as log lines of this logger.
_OUTPUT = logging.getLogger(f"{OFFICIAL_LOGGER}.output")

_local = threading.local()
_active = 0


def _official(name: str) -> bool:
    return name == OFFICIAL_LOGGER or name.startswith(OFFICIAL_LOGGER + ".")


class _Routed:
    """A stand-in for ``sys.stdout`` / ``sys.stderr``: what OSWorld's threads write becomes log
    lines (by line); every other thread, and the log handlers themselves, write through."""

    def __init__(self, inner: Any, name: str) -> None:
        self.inner = inner
        self.name = name

    def write(self, text: str) -> int:
        if threading.current_thread().name != OFFICIAL_THREAD or getattr(_local, "bypass", False):
            return int(self.inner.write(text) or 0)
        key = f"partial_{self.name}"
        *lines, rest = (getattr(_local, key, "") + text).split("\n")
        setattr(_local, key, rest)
        for line in lines:
            if line.strip():
                _OUTPUT.info("[%s] %s", self.name, line.rstrip())
        return len(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        return bool(self.inner.isatty())

    def fileno(self) -> int:
        return int(self.inner.fileno())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextmanager
def official_output_to_log() -> Iterator[None]:
    """While inside (and inside `run_log`), what OSWorld's threads print goes to the log. It
    nests: a live display that replaces ``sys.stdout`` enters it again so its replacement is
    routed too."""
    if not _active:
        yield
        return
    before = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Routed(sys.stdout, "stdout"), _Routed(sys.stderr, "stderr")  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = before


class _Terminal(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to the ``sys.stderr`` of the moment (a live display's, if one runs), past the
    routing of OSWorld's output."""

    def __init__(self, verbose: bool) -> None:
        logging.Handler.__init__(self, logging.INFO)
        self.verbose = verbose

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    def filter(self, record: logging.LogRecord) -> bool:
        if _official(record.name) or record.name == _PY_WARNINGS:  # OSWorld's chatter, libraries' deprecations
            return self.verbose
        return record.levelno >= logging.WARNING

    def emit(self, record: logging.LogRecord) -> None:
        _local.bypass = True
        try:
            super().emit(record)
        finally:
            _local.bypass = False


class _OneLine(logging.Formatter):
    """``warning: message (KeyError: 'x'; traceback in runs/r/run.log)``: one line, no traceback."""

    def __init__(self, log_path: Path | None) -> None:
        super().__init__()
        self.log_path = log_path

    def format(self, record: logging.LogRecord) -> str:
        text = (record.getMessage().strip().splitlines() or [""])[0]
        if _official(record.name):
            text = f"{record.name}: {text}"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            first = (str(exc).strip().splitlines() or [""])[0]
            where = f"; traceback in {self.log_path}" if self.log_path is not None else ""
            text += f" ({type(exc).__name__}: {first}{where})"
        return redact_urls(f"{record.levelname.lower()}: {text}")


class _Redacting(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact_urls(super().format(record))


def _file_handler(path: Path) -> logging.Handler:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8", errors="replace"))
    handler.setLevel(logging.INFO)
    handler.setFormatter(_Redacting("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    return handler


@contextmanager
def run_log(folder: Path | None, *, verbose: bool = False) -> Iterator[Path | None]:
    """Send log lines to ``folder/run.log`` (None: no file) and the terminal's share to
    stderr while inside; yields the log's path. Levels and handlers are restored afterwards."""
    global _active
    root = logging.getLogger()
    path = None if folder is None else folder / RUN_LOG
    handlers: list[logging.Handler] = []
    if path is not None:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # type: ignore[union-attr]
        handlers.append(_file_handler(path))
    terminal = _Terminal(verbose)
    terminal.setFormatter(_OneLine(path))
    handlers.append(terminal)
    levels = {}
    for name in _FILED:
        logger = logging.getLogger(name)
        levels[name] = logger.level
        if logger.level == logging.NOTSET:  # a level set on purpose is kept
            logger.setLevel(logging.INFO)
    for handler in handlers:
        root.addHandler(handler)
    _active += 1
    logging.captureWarnings(True)
    try:
        with official_output_to_log():
            yield path
    finally:
        logging.captureWarnings(False)
        _active -= 1
        for handler in handlers:
            root.removeHandler(handler)
            handler.close()
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
