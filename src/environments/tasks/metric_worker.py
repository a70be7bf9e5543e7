"""The process that runs OSWorld's metrics for one scoring, inside `metric_sandbox`'s walls.

It reads requests from stdin and answers on stdout, each a frame: an 8-byte big-endian
length, then the payload. A request is a pickle (from the host, which this process trusts)
of ``(metric name, args, options)``, or of ``("preload", names)``; an answer is JSON (the host
trusts nothing of this process): ``{"score": x}``, ``{"missing": message}`` when the metric
raised FileNotFoundError (OSWorld scores that 0), ``{"error": message}``, or ``{"ready": n}``.

Run as ``python .../environments/tasks/metric_worker.py``: by path, so that neither this
package's ``__init__`` (the whole task machinery) nor anything but the metric loader
(`official`, loaded by path too) is imported before the metrics themselves.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import math
import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Any, BinaryIO

__all__ = ["main", "read_frame", "write_frame"]

#: The largest request a worker reads: getters' values (paths, trees, page texts).
REQUEST_LIMIT = 512 * 1024 * 1024
_MESSAGE = 500


def read_frame(stream: BinaryIO, limit: int) -> bytes | None:
    """One frame's payload, or None at the end of the stream."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    (size,) = struct.unpack(">Q", head)
    if size > limit:
        raise ValueError(f"a frame of {size} bytes is over the limit of {limit}")
    data = stream.read(size)
    if len(data) < size:
        return None
    return data


def write_frame(stream: BinaryIO, payload: bytes) -> None:
    stream.write(struct.pack(">Q", len(payload)) + payload)
    stream.flush()


@functools.cache
def _official() -> Any:
    """The `official` module, loaded from its file beside this one."""
    spec = importlib.util.spec_from_file_location("agent_s3_official", Path(__file__).with_name("official.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up here
    spec.loader.exec_module(module)
    return module


def _answer(name: str, args: tuple[Any, ...], options: dict[str, Any]) -> dict[str, Any]:
    try:
        score = _official().metric(name).fn(*args, **options)
    except FileNotFoundError as exc:
        return {"missing": str(exc)[:_MESSAGE]}
    except Exception as exc:  # any failure of the official code is the task's, said in one line
        return {"error": f"{type(exc).__name__}: {exc}"[:_MESSAGE]}
    if score is None:
        return {"score": None}
    try:
        value = float(score)
    except (TypeError, ValueError):
        return {"error": f"the metric returned {type(score).__name__}, not a number"}
    return {"score": None if math.isnan(value) else value}


def main() -> int:
    logging.basicConfig(level=logging.ERROR)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # what the official code prints never mixes with the answers
    while True:
        try:
            frame = read_frame(stdin, REQUEST_LIMIT)
        except ValueError as exc:
            write_frame(stdout, json.dumps({"error": str(exc)}).encode())
            return 1
        if frame is None:
            return 0
        request = pickle.loads(frame)
        if request[0] == "preload":
            loaded = 0
            for name in request[1]:
                try:
                    _official().metric(name)
                    loaded += 1
                except Exception:  # reported when the metric is called
                    continue
            answer: dict[str, Any] = {"ready": loaded, "uid": os.getuid()}
        else:
            answer = _answer(*request)
        write_frame(stdout, json.dumps(answer).encode())


if __name__ == "__main__":
    raise SystemExit(main())
