"""How many bytes may cross between a desktop and the host, in one place.

A desktop is untrusted: the files it serves, its recordings and its answers are the model's
to shape. Every path by which bytes come out of one is bounded by these figures, on both
sides: the controller server refuses to send more (`environments.server`), the host's doors
refuse to relay more (`environments.doors.forward`, `desktop_door`), and the host's clients
refuse to read more (`environments.osworld.client`). A file larger than its limit is an
error with one line, never a silent truncation and never a score.
"""

from __future__ import annotations

__all__ = ["FILE_BYTES", "RECORDING_BYTES", "REPLY_SLACK", "SPARSE_SLACK", "too_large"]

_MIB = 1024 * 1024
#: A file fetched for scoring (``/file``) or uploaded by a task (``/setup/upload``). OSWorld's
#: largest task files (videos, archives) are tens of MiB.
FILE_BYTES = 256 * _MIB
#: A screen recording: ffmpeg is asked to stop at this size (``-fs``).
RECORDING_BYTES = 200 * _MIB
#: What a reply may carry beyond its file: ffmpeg's last chunk past ``-fs``, multipart heads.
REPLY_SLACK = 16 * _MIB
#: Bytes a file may have beyond what its disk blocks hold before it counts as sparse: a
#: file of holes costs its desktop nothing and the host its whole size.
SPARSE_SLACK = 1 * _MIB


def too_large(what: str, size: int, limit: int) -> str:
    """The one line that refuses a file: what it is, its size, the limit."""
    return f"{what} is {size / _MIB:.1f} MiB, over the {limit // _MIB} MiB limit of what a desktop may send"
