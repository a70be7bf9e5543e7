"""Named snapshots: a home template folder built once and cached, plus the apps to start.

Reverting a desktop is then "a new sandbox whose fresh home is a copy of the template, with
the snapshot's apps started": a copy of a few hundred kilobytes. Templates are root-owned;
each copy is handed to the desktop's own uid (see `homes`). Templates are
keyed by a hash of their spec, so editing a spec rebuilds its template and never reuses a
stale one.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.protocols import EnvError

from .appconfig import BASE_DIRS, BASE_FILES, openbox_config, write_libreoffice_profile

__all__ = [
    "SNAPSHOTS",
    "AppLaunch",
    "SnapshotSpec",
    "ensure_template",
    "snapshot_spec",
]

_FORMAT = 4
_BUILD_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class AppLaunch:
    """One application a snapshot has running. ``~`` in arguments means the desktop's home.

    ``window`` is a substring of the window title that shows the app is up; revert waits
    for it so the screen matches the snapshot when revert returns.
    """

    argv: tuple[str, ...]
    window: str | None = None


@dataclass(frozen=True, slots=True)
class SnapshotSpec:
    """What a snapshot holds: extra files in the home (relative path → text) and running apps."""

    name: str
    files: Mapping[str, str] = field(default_factory=dict)
    launch: tuple[AppLaunch, ...] = ()

    def digest(self) -> str:
        blob = json.dumps(
            {
                "format": _FORMAT,
                "name": self.name,
                "files": dict(sorted(self.files.items())),
                "base": dict(sorted(BASE_FILES.items())),
                "launch": [[list(a.argv), a.window] for a in self.launch],
            },
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


SNAPSHOTS: dict[str, SnapshotSpec] = {
    "blank": SnapshotSpec(name="blank"),
    "mousepad": SnapshotSpec(
        name="mousepad",
        files={"Documents/notes.txt": ""},
        launch=(AppLaunch(("mousepad", "--disable-server", "~/Documents/notes.txt"), window="notes.txt"),),
    ),
    "terminal": SnapshotSpec(
        name="terminal", launch=(AppLaunch(("xterm", "-T", "Terminal"), window="Terminal"),)
    ),
    "calc": SnapshotSpec(
        name="calc",
        launch=(AppLaunch(("soffice", "--calc", "--norestore"), window="LibreOffice Calc"),),
    ),
    "writer": SnapshotSpec(
        name="writer",
        launch=(AppLaunch(("soffice", "--writer", "--norestore"), window="LibreOffice Writer"),),
    ),
}


def snapshot_spec(name_or_spec: str | SnapshotSpec) -> SnapshotSpec:
    """Look a built-in snapshot up by name (a spec passes through)."""
    if isinstance(name_or_spec, SnapshotSpec):
        return name_or_spec
    try:
        return SNAPSHOTS[name_or_spec]
    except KeyError:
        known = ", ".join(sorted(SNAPSHOTS))
        raise EnvError(f"unknown snapshot {name_or_spec!r}; use one of: {known}") from None


def ensure_template(spec: SnapshotSpec, root: Path, *, uid: int = 0, gid: int = 0) -> Path:
    """The template home for ``spec`` under ``root``, built now if it is not cached yet.

    Built under a lock in a scratch folder and renamed into place, so nobody ever sees a
    half-built template.
    """
    final = root / f"{spec.name}-{spec.digest()}-u{uid}"
    if (final / "home").is_dir():
        return final / "home"
    root.mkdir(parents=True, exist_ok=True)
    # One builder at a time (threads and processes): parallel desktops wait for the first.
    with _BUILD_LOCK, open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (final / "home").is_dir():
            _build(spec, root, final, uid=uid, gid=gid)
    return final / "home"


def _build(spec: SnapshotSpec, root: Path, final: Path, *, uid: int, gid: int) -> None:
    scratch = root / f".build-{uuid.uuid4().hex}"
    home = scratch / "home"
    try:
        home.mkdir(parents=True)
        for rel in BASE_DIRS:
            (home / rel).mkdir(parents=True, exist_ok=True)
        for rel, text in {**BASE_FILES, **spec.files}.items():
            path = _inside(home, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        write_libreoffice_profile(home)
        rc = home / ".config/openbox/rc.xml"
        rc.parent.mkdir(parents=True, exist_ok=True)
        rc.write_text(openbox_config())
        (scratch / "snapshot.json").write_text(
            json.dumps({"name": spec.name, "digest": spec.digest(), "uid": uid}, indent=2)
        )
        _chown_tree(home, uid, gid)
        home.chmod(0o700)
        scratch.rename(final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _inside(home: Path, rel: str) -> Path:
    path = (home / rel).resolve()
    if not path.is_relative_to(home.resolve()):
        raise EnvError(f"snapshot file {rel!r} points outside the home; use a path relative to ~")
    return path


def _chown_tree(top: Path, uid: int, gid: int) -> None:
    os.chown(top, uid, gid)
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, gid, follow_symlinks=False)
