"""What the server sends out of a desktop is bounded and taken from one open descriptor: a
regular file of at most its limit, never sparse, never a FIFO that blocks or a device that
never ends. Devices are made with mknod in the test's folder."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from environments.limits import FILE_BYTES
from environments.server.sending import FileRefused, open_bounded


def _refused(path: Path, limit: int = 1 << 20, **kw: Any) -> FileRefused:
    with pytest.raises(FileRefused) as info:
        fd, _ = open_bounded(str(path), limit, "the file", **kw)
        os.close(fd)
    return info.value


def test_a_regular_file_within_the_limit_opens(tmp_path: Path) -> None:
    path = tmp_path / "ok.txt"
    path.write_bytes(b"x" * 1000)
    fd, size = open_bounded(str(path), 1000, "the file")
    try:
        assert size == 1000 and os.read(fd, 2000) == b"x" * 1000
    finally:
        os.close(fd)


def test_what_must_not_be_sent_is_refused_with_one_line(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(b"y" * 5000)
    assert _refused(big, 4096).status == 413 and "limit" in str(_refused(big, 4096))
    sparse = tmp_path / "sparse.bin"
    with sparse.open("wb") as f:
        f.truncate(1 << 30)
    refused = _refused(sparse, 2 << 30)
    assert refused.status == 413 and "sparse" in str(refused)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert "not a regular file" in str(_refused(fifo))  # opened without blocking, then refused
    assert time.monotonic() - started < 2
    link = tmp_path / "link"
    link.symlink_to(big)
    assert "symbolic link" in str(_refused(link, follow=False))
    assert _refused(tmp_path / "missing").status == 404
    assert _refused(tmp_path).status == 404
    if os.geteuid() == 0:
        zero = tmp_path / "zero"
        os.mknod(zero, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        (tmp_path / "to-zero").symlink_to(zero)
        assert "not a regular file" in str(_refused(tmp_path / "to-zero"))


@pytest.mark.desktop
@pytest.mark.integration
async def test_the_server_refuses_a_sparse_gigabyte_at_once(server: Any, tmp_path: Path) -> None:
    sparse = tmp_path / "result.xlsx"
    with sparse.open("wb") as f:
        f.truncate(1 << 30)
    holes = tmp_path / "holes.docx"  # under the limit, but all holes
    with holes.open("wb") as f:
        f.truncate(100 << 20)
    plain = tmp_path / "plain.txt"
    plain.write_text("hello")
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=30) as http:
        refused = await http.post("/file", data={"file_path": str(sparse)})
        sparse_refused = await http.post("/file", data={"file_path": str(holes)})
        fine = await http.post("/file", data={"file_path": str(plain)})
    assert refused.status_code == 413 and "over the 256 MiB limit" in refused.json()["error"], refused.text
    assert sparse_refused.status_code == 413 and "sparse" in sparse_refused.json()["error"], sparse_refused.text
    assert len(refused.content) < 1000 and len(sparse_refused.content) < 1000
    assert fine.status_code == 200 and fine.content == b"hello"
    assert fine.headers["content-length"] == "5"
    assert FILE_BYTES >= 64 << 20  # OSWorld's task files (videos, archives) must still pass
