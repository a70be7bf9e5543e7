"""The warm action executor's child: pyautogui imported once, then one action per request.

Standalone on purpose (stdlib and pyautogui only), so it runs under an unprivileged uid
without access to the project's sources. Framing on stdin/stdout: a 4-byte big-endian
length, then UTF-8 JSON. The first message out is ``{"ready": true}`` (or the import error).
The code it runs comes from the project's own action compiler (validated actions), never
raw model text; it runs in a fresh namespace each time, like a new ``python -c``.
"""

import contextlib
import io
import json
import os
import struct
import sys
import traceback

_LIMIT = 256 * 1024


def _send(sink, message):
    data = json.dumps(message).encode("utf-8")
    sink.write(struct.pack(">I", len(data)) + data)
    sink.flush()


def _receive(source):
    header = source.read(4)
    if len(header) < 4:
        return None
    (size,) = struct.unpack(">I", header)
    return json.loads(source.read(size).decode("utf-8"))


def _trim(text):
    if len(text) <= _LIMIT:
        return text
    half = _LIMIT // 2
    return f"{text[:half]}\n[... {len(text) - _LIMIT} characters omitted ...]\n{text[-half:]}"


def _run(code, namespace):
    out, err = io.StringIO(), io.StringIO()
    returncode = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            exec(compile(code, "<action>", "exec"), namespace)  # noqa: S102 - compiled actions, see module doc
        except SystemExit as stop:
            if stop.code is None:
                returncode = 0
            elif isinstance(stop.code, int):
                returncode = stop.code
            else:
                print(stop.code, file=sys.stderr)
                returncode = 1
        except BaseException as exc:
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
            returncode = 1
    return {
        "status": "ok" if returncode == 0 else "error",
        "returncode": returncode,
        "stdout": _trim(out.getvalue()),
        "stderr": _trim(err.getvalue()),
    }


def _die_with_parent():
    """If the server is killed outright (no chance to clean up), take this child with it."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os._exit(1)


def main():
    _die_with_parent()
    source = os.fdopen(os.dup(0), "rb")
    sink = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    try:
        import time

        import pyautogui

        pyautogui.PAUSE = 0
        pyautogui.FAILSAFE = False
    except BaseException as exc:
        _send(sink, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    _send(sink, {"ready": True, "pid": os.getpid()})
    while (request := _receive(source)) is not None:
        namespace = {"__name__": "__action__", "pyautogui": pyautogui, "time": time}
        _send(sink, _run(request["code"], namespace))


if __name__ == "__main__":
    main()
