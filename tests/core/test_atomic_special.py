"""core.atomic never replaces what is not a regular file: a null-like device or a FIFO is
written through, a folder, a socket, a block device or another character device is refused
with one line. Device nodes are made with mknod in the test's own folder (never /dev)."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

from core.atomic import (
    append_line,
    make_private_dir,
    write_bytes_atomic,
    write_json_atomic,
    write_text_atomic,
)
from runner.cli.errors import describe_error


def _device(folder: Path, name: str, kind: int, major: int, minor: int) -> Path:
    if os.geteuid() != 0:
        pytest.skip("mknod needs root")
    path = folder / name
    os.mknod(path, kind | 0o666, os.makedev(major, minor))
    return path


def _same_node(path: Path, before: os.stat_result) -> bool:
    after = os.lstat(path)
    return stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_rdev == before.st_rdev


def test_a_null_like_device_is_written_through_never_replaced(tmp_path: Path) -> None:
    null = _device(tmp_path, "null", stat.S_IFCHR, 1, 3)
    before = os.lstat(null)
    write_json_atomic(null, {"n": 1})
    write_text_atomic(null, "text")
    write_bytes_atomic(null, b"x" * 3_000_000, durable=False)
    append_line(null, '{"a": 1}')
    assert _same_node(null, before) and stat.S_ISCHR(os.lstat(null).st_mode)
    assert os.listdir(tmp_path) == ["null"]  # no temporary left beside it
    link = tmp_path / "stdout-like"
    link.symlink_to(null)  # /dev/stdout is a link too
    write_text_atomic(link, "through the link")
    assert link.is_symlink() and _same_node(null, before)


def test_a_fifo_is_written_through_when_read_and_refused_when_not(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    ready = threading.Event()

    def read() -> None:
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        ready.set()
        chunks: list[bytes] = []
        while True:  # before the writer opens, a read sees no writer and returns b""
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:  # the writer is open, its data not yet written
                continue
            if not chunk and chunks:
                break
            if chunk:
                chunks.append(chunk)
        os.close(fd)
        got.append(b"".join(chunks))

    reader = threading.Thread(target=read)
    reader.start()
    ready.wait(5)
    write_json_atomic(fifo, {"through": True})
    reader.join(10)
    assert got and b'"through": true' in got[0]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(OSError) as info:  # nobody reads: refused at once, never blocks
        write_text_atomic(fifo, "x")
    assert info.value.errno == errno.ENXIO and "reader" in describe_error(info.value)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.parametrize("kind", ["folder", "socket", "block", "other-char"])
def test_targets_that_must_not_be_written_are_refused_with_one_line(tmp_path: Path, kind: str) -> None:
    target = tmp_path / kind
    if kind == "folder":
        target.mkdir()
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(target))
    elif kind == "block":  # an unassigned major: nothing behind it even if it were opened
        _device(tmp_path, kind, stat.S_IFBLK, 240, 7)
    else:
        _device(tmp_path, kind, stat.S_IFCHR, 240, 7)
    before = os.lstat(target)
    for write in (lambda: write_text_atomic(target, "x"), lambda: append_line(target, "x")):
        with pytest.raises(OSError) as info:
            write()
        line = describe_error(info.value)
        assert "\n" not in line and "not a file to write" in line and str(target) in line, line
    assert _same_node(target, before)
    assert sorted(os.listdir(tmp_path)) == [kind]


def test_a_folder_option_pointed_at_a_device_is_one_line(tmp_path: Path) -> None:
    null = _device(tmp_path, "null", stat.S_IFCHR, 1, 3)
    with pytest.raises(OSError) as info:
        make_private_dir(null / "run")
    with pytest.raises(OSError) as direct:
        make_private_dir(null)
    assert "not a folder" in describe_error(direct.value), describe_error(direct.value)
    assert info.value.errno in (errno.ENOTDIR, errno.EEXIST)
    assert stat.S_ISCHR(os.lstat(null).st_mode)
