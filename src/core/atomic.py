"""Files that are whole or absent, and JSONL logs that survive a kill in the middle of a line.

A run is resumed from disk alone, so nothing a reader finds may be half written.

- Whole files (headers, results, screenshots) go to a hidden temporary name in the same
  folder, are flushed and fsynced, then `os.replace`d over the final name. A kill at any
  moment leaves the old file, the new file or no file, never a mix; at worst a stray
  temporary (``.<name>.<random>.tmp``) that `remove_temporaries` sweeps away.
- Logs (``traj.jsonl``, ``ledger.jsonl``) grow by one ``write`` of a whole line on an
  ``O_APPEND`` descriptor. The kernel may stop a large write part-way when the process is
  killed, so a crash can leave one torn last line and nothing worse. `read_jsonl` skips it,
  and a writer calls `repair_jsonl_tail` once before its first append so the next record
  starts on a line of its own. Appending is O(1) per record; rewriting the whole log
  atomically would cost O(n) per record and O(n²) per rollout.

One writer per log file at a time is assumed (one rollout, one ledger owner).

A target that is not a regular file is never replaced: a FIFO or a sink device (``/dev/null``,
``/dev/zero``, ``/dev/full``, a terminal) is written through, anything else (a folder, a
socket, a block device, any other character device) is refused with one line. Run as root,
`os.replace` over ``--json /dev/null`` would otherwise turn the machine's ``/dev/null`` into a
regular file.

Run folders hold what a computer-use model must not read (other rollouts, expected-answer
files of the evaluator), and desktops run under other user ids on the same machine, so every
file written here is 0600 and `make_private_dir` makes folders 0700.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

__all__ = [
    "append_line",
    "count_lines",
    "is_disk_full",
    "is_temporary",
    "make_private_dir",
    "read_jsonl",
    "read_line",
    "remove_temporaries",
    "repair_jsonl_tail",
    "write_bytes_atomic",
    "write_json_atomic",
    "write_text_atomic",
]

_log = logging.getLogger(__name__)

#: Owner only: a desktop's user (another uid) must not read what a run writes.
_FILE_MODE = 0o600
_DIR_MODE = 0o700
_CHUNK = 1 << 20
# mkstemp names: the target's name, then 8 random characters.
_TEMP_NAME = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")


def is_disk_full(exc: BaseException) -> bool:
    """Whether `exc` says the file system has no room left (full disk or used-up quota)."""
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def _name_file(exc: OSError, path: Path | str) -> OSError:
    """`exc` with the file it failed on, so the one error line a user sees names it."""
    if exc.filename is None:
        exc.filename = str(path)
    return exc


def make_private_dir(path: Path | str) -> Path:
    """Create `path` and any missing parents as 0700 folders (existing ones are left as
    they are); returns it.

    `Path.mkdir(parents=True, mode=...)` applies the mode to the last folder only, so a run
    folder created by its first file would leave its parents open to other users.
    """
    path = Path(path)
    missing: list[Path] = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=_DIR_MODE)
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a folder; give the path of a folder", str(path))
    return path


#: Character devices written through, by (major, minor); minor None is every minor: null,
#: zero, full, and terminals (tty, console, ptmx, pseudo-terminals).
_SINK_DEVICES = {(1, 3), (1, 5), (1, 7), (4, None), (5, None), *((major, None) for major in range(136, 144))}


def _not_a_file(path: Path, kind: str) -> OSError:
    return OSError(errno.EINVAL, f"{kind} is not a file to write; give the path of a file", str(path))


def _write_through(path: Path, data: bytes) -> bool:
    """Write `data` into `path` when it exists and is not a regular file (a FIFO, a sink
    device); True if done. Refuses, with one line, a target that must not be written at all."""
    try:
        st = os.stat(path)  # follows links: /dev/stdout names the process's own pipe
    except (FileNotFoundError, NotADirectoryError):
        return False
    mode = st.st_mode
    if stat.S_ISREG(mode):
        return False
    if stat.S_ISDIR(mode):
        raise _not_a_file(path, "a folder")
    if stat.S_ISCHR(mode):
        major, minor = os.major(st.st_rdev), os.minor(st.st_rdev)
        if (major, minor) not in _SINK_DEVICES and (major, None) not in _SINK_DEVICES:
            raise _not_a_file(path, f"a character device ({major},{minor}) other than a null sink or terminal")
    elif not stat.S_ISFIFO(mode):
        kinds = {stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}
        raise _not_a_file(path, kinds.get(stat.S_IFMT(mode), "a special file"))
    try:  # never blocks on a FIFO nobody reads, never creates or truncates anything
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "nothing reads this FIFO; start its reader first", str(path)) from None
        raise _name_file(exc, path) from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:
        raise _name_file(exc, path) from None
    finally:
        os.close(fd)
    return True


def write_bytes_atomic(path: Path | str, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` in one step.

    With `durable` the data and the rename are fsynced, so they also survive a power cut;
    without it they still survive a killed process (the page cache outlives it). A target
    that exists and is not a regular file is written through or refused (module doc), never
    replaced.
    """
    path = Path(path)
    if _write_through(path, data):
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise _name_file(exc, path) from None
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable:
        _fsync_folder(path.parent)


def write_text_atomic(path: Path | str, text: str, *, durable: bool = True) -> None:
    """`write_bytes_atomic` for UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"), durable=durable)


def write_json_atomic(path: Path | str, obj: BaseModel | Any, *, durable: bool = True) -> None:
    """Write a pydantic model or a JSON-serialisable value as indented UTF-8 JSON."""
    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = json.dumps(obj, indent=2, ensure_ascii=False)
    write_text_atomic(path, text + "\n", durable=durable)


def append_line(path: Path | str, line: str | bytes, *, durable: bool = True) -> int | None:
    """Append one line (without its newline) to a log in a single write; return the byte
    offset where it starts (None for a target that is not a regular file), so a reader
    can find it again without keeping it.

    Raises ValueError if `line` contains a newline: it would split one record into two.
    When the write or its fsync fails (a full disk, a quota), the log is cut back to where
    it was before the error is raised, so a failed append never leaves a partial line in
    front of the next record.
    """
    data = line.encode("utf-8") if isinstance(line, str) else line
    if b"\n" in data or b"\r" in data:
        raise ValueError("a log line must not contain a newline; serialise it compactly")
    data += b"\n"
    if _write_through(Path(path), data):
        return None
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, _FILE_MODE)
    try:
        start = os.fstat(fd).st_size  # one writer per log: nobody else moves the end
        try:
            view = memoryview(data)
            while view:  # a short write only happens on a signal or a full disk
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # truncating frees space, so it works on a full disk
                os.ftruncate(fd, start)
            raise _name_file(exc, path) from None
        return os.lseek(fd, 0, os.SEEK_CUR) - len(data)  # O_APPEND left the offset at our line's end
    finally:
        os.close(fd)


def repair_jsonl_tail(path: Path | str) -> int:
    """Cut off a torn last line (one without its newline); return how many bytes went.

    Call it once before appending to a log that a killed process may have written.
    """
    path = Path(path)
    try:
        fh = path.open("r+b")
    except FileNotFoundError:
        return 0
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        keep = _last_newline_end(fh, size)
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
        return size - keep


def read_jsonl(path: Path | str) -> Iterator[dict[str, Any]]:
    """Yield each complete JSON line of a log, lazily; an absent file yields nothing.

    A last line without its newline is a torn write: it is skipped, with a warning naming
    the file. Any other line that does not parse is real corruption and raises ValueError
    naming the file and line.
    """
    path = Path(path)
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        for number, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                _log.warning("%s: skipped a torn last line %d (%d bytes, no newline)", path, number, len(raw))
                return
            if not raw.strip():
                continue
            try:
                yield json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not a JSON line ({exc.msg})") from None


def count_lines(path: Path | str) -> int:
    """Complete lines in a file, without decoding them; 0 if it is absent."""
    total = 0
    try:
        with Path(path).open("rb") as fh:
            while chunk := fh.read(_CHUNK):
                total += chunk.count(b"\n")
    except FileNotFoundError:
        return 0
    return total


def read_line(path: Path | str, index: int) -> bytes | None:
    """The complete line number `index` (from 0) without its newline, or None.

    Only newlines are searched for; no other line is decoded or parsed.
    """
    if index < 0:
        raise IndexError(f"line index must be >= 0, not {index}")
    try:
        fh = Path(path).open("rb")
    except FileNotFoundError:
        return None
    with fh:
        seen = 0
        parts: list[bytes] = []
        while chunk := fh.read(_CHUNK):
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    if seen == index:
                        parts.append(chunk[start:])
                    break
                if seen == index:
                    parts.append(chunk[start:end])
                    return b"".join(parts)
                seen += 1
                start = end + 1
    return None  # fewer lines, or the wanted one is torn


def is_temporary(name: str) -> bool:
    """Whether a file name is one of `write_bytes_atomic`'s temporaries."""
    return bool(_TEMP_NAME.match(name))


def remove_temporaries(root: Path | str) -> int:
    """Delete temporaries a killed writer left under `root`; return how many.

    Only call it while nothing writes under `root` (at start or resume), or it would
    remove a file another writer is about to rename.
    """
    removed = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            if is_temporary(name):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
    return removed


def _last_newline_end(fh: Any, size: int) -> int:
    """Offset just past the last newline before `size`, or 0 if there is none."""
    pos = size
    while pos > 0:
        start = max(0, pos - _CHUNK)
        fh.seek(start)
        found = fh.read(pos - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        pos = start
    return 0


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
