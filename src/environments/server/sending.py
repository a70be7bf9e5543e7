"""Files the server sends out of the desktop, bounded and taken as they are at one moment.

The desktop's own processes may replace a file at any time (a 1 GiB sparse file swapped in
for a result or a recording, a symlink to ``/dev/zero``, a FIFO nobody writes), so a file is
opened first, without blocking, and everything is decided on that one open descriptor: a
regular file, at most `limit` bytes, not sparse; then exactly the size it had is sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import stat

from aiohttp import web

from environments.limits import SPARSE_SLACK, too_large

__all__ = ["FileRefused", "open_bounded", "send_bounded"]

_CHUNK = 256 * 1024


class FileRefused(Exception):
    """The file cannot be sent; ``status`` and the message say why (404 when there is none)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def open_bounded(path: str, limit: int, what: str, *, follow: bool = True) -> tuple[int, int]:
    """An open descriptor of the regular file at `path` and its size, or `FileRefused`."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise FileRefused(404, "File not found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileRefused(403, f"{what} is a symbolic link") from None
        raise FileRefused(404 if exc.errno in (errno.ENOENT, errno.ENOTDIR) else 403, f"{what}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(404, "File not found" if stat.S_ISDIR(st.st_mode) else f"{what} is not a regular file")
        if st.st_size > limit:
            raise FileRefused(413, too_large(what, st.st_size, limit))
        if st.st_size > st.st_blocks * 512 + SPARSE_SLACK:
            raise FileRefused(413, f"{what} is sparse ({st.st_size} bytes, {st.st_blocks * 512} on disk); not sent")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


async def send_bounded(
    request: web.Request, fd: int, size: int, *, content_type: str, filename: str
) -> web.StreamResponse:
    """Send `size` bytes of the open file `fd` (and close it); a file that shrank meanwhile
    ends the reply early, one that grew is cut at its size when opened."""
    try:
        response = web.StreamResponse(
            headers={
                "Content-Type": content_type,
                "Content-Disposition": f'attachment; filename="{filename}"',
            }
        )
        response.content_length = size
        await response.prepare(request)
        left = size
        while left > 0:
            chunk = await asyncio.to_thread(os.read, fd, min(_CHUNK, left))
            if not chunk:
                break
            await response.write(chunk)
            left -= len(chunk)
        await response.write_eof()
        return response
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
