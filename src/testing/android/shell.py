"""The commands the simulated device's `sh` understands, the way Android's toybox answers them.

Only what agents and task checks use: `input`, `screencap`, `wm size`, `am`, `monkey`, `pm
list packages`, `settings`, `dumpsys window|activity`, `getprop`, `cat`, `echo`, `test`,
`true`, `false`, `sleep`, `rm`, with `;`, `&&`, `||`, `|` (into `grep`, `head`, `wc -l`) and
`> FILE`. Words are split the way a POSIX shell splits them (`shlex`), so quoting on the host
side is tested for real. Anything else answers as toybox's sh does for a missing program.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass

from .device import APPS, NOTES, SimulatedDevice

__all__ = ["KEYCODES", "ShellOutput", "run_shell"]

#: Key names `input keyevent` accepts here, with their numeric codes (android.view.KeyEvent).
KEYCODES: dict[str, int] = {
    "KEYCODE_HOME": 3,
    "KEYCODE_BACK": 4,
    "KEYCODE_DPAD_UP": 19,
    "KEYCODE_DPAD_DOWN": 20,
    "KEYCODE_DPAD_LEFT": 21,
    "KEYCODE_DPAD_RIGHT": 22,
    "KEYCODE_VOLUME_UP": 24,
    "KEYCODE_VOLUME_DOWN": 25,
    "KEYCODE_POWER": 26,
    "KEYCODE_TAB": 61,
    "KEYCODE_SPACE": 62,
    "KEYCODE_ENTER": 66,
    "KEYCODE_DEL": 67,
    "KEYCODE_MENU": 82,
    "KEYCODE_SEARCH": 84,
    "KEYCODE_ESCAPE": 111,
    "KEYCODE_FORWARD_DEL": 112,
    "KEYCODE_MOVE_HOME": 122,
    "KEYCODE_MOVE_END": 123,
    "KEYCODE_APP_SWITCH": 187,
    **{f"KEYCODE_{c}": 29 + i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")},
    **{f"KEYCODE_{d}": 7 + d for d in range(10)},
}
_BY_NUMBER = {v: k for k, v in KEYCODES.items()}


@dataclass
class ShellOutput:
    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0


Stdin = Callable[[], bytes]


def _text(out: str) -> ShellOutput:
    return ShellOutput(out.encode())


def _err(message: str, code: int = 1) -> ShellOutput:
    return ShellOutput(b"", message.encode() + b"\n", code)


def _input(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    usage = "Usage: input [<source>] <command> [<arg>...]"
    if not args:
        return _err(usage)
    cmd, rest = args[0], args[1:]
    try:
        if cmd == "tap" and len(rest) == 2:
            dev.tap(float(rest[0]), float(rest[1]))
        elif cmd in ("swipe", "draganddrop") and len(rest) in (4, 5):
            x1, y1, x2, y2 = (float(v) for v in rest[:4])
            ms = int(rest[4]) if len(rest) == 5 else 300
            dev.swipe(x1, y1, x2, y2, ms)
        elif cmd == "text" and len(rest) == 1:
            # Android's `input text` turns each "%s" into a space.
            dev.text(rest[0].replace("%s", " "))
        elif cmd == "keyevent" and rest:
            longpress = rest[0] == "--longpress"
            for name in rest[1:] if longpress else rest:
                code = _keycode(name)
                if code is None:
                    return _err(f"Error: unknown keycode {name!r}")
                dev.key(code)
        else:
            return _err(usage)
    except ValueError:
        return _err(f"Error: invalid number in {' '.join(args)!r}")
    return ShellOutput()


def _keycode(name: str) -> str | None:
    if name.isdigit():
        return _BY_NUMBER.get(int(name))
    full = name if name.startswith("KEYCODE_") else f"KEYCODE_{name}"
    return full if full in KEYCODES else None


def _component(package: str) -> str:
    activity = APPS[package][1]
    return f"{package}/{activity}"


def _am(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    if args[:1] == ["force-stop"] and len(args) == 2:
        dev.force_stop(args[1])
        return ShellOutput()
    if args[:1] != ["start"]:
        return _err("Error: unknown command; try 'am help'")
    opts = args[1:]
    if "-n" in opts:
        component = opts[opts.index("-n") + 1]
        package = component.split("/", 1)[0]
        if not dev.start(package):
            return _err(f"Error: Activity class {{{component}}} does not exist.")
        return _text(f"Starting: Intent {{ cmp={component} }}\n")
    if "-a" in opts and "-d" in opts and opts[opts.index("-a") + 1] == "android.intent.action.VIEW":
        target = opts[opts.index("-d") + 1]
        if target.startswith("file://") or target.endswith(".txt"):
            dev.start(NOTES)
            return _text(f"Starting: Intent {{ act=android.intent.action.VIEW dat={target} }}\n")
        return _err(f"Error: Activity not started, unable to resolve Intent {{ dat={target} }}")
    return _err("Error: Activity not started, no component given")


def _monkey(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    if "-p" not in args:
        return _err("** Error: no package given")
    package = args[args.index("-p") + 1]
    if not dev.start(package):
        return ShellOutput(b"", b"** No activities found to run, monkey aborted.\n", 251)
    return _text(
        "Events injected: 1\n## Network stats: elapsed time=8ms (0ms mobile, 0ms wifi, 8ms not connected)\n"
    )


def _settings(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    if len(args) >= 3 and args[0] == "get" and args[1] in ("global", "system", "secure"):
        with dev.lock:
            return _text(dev.state.settings.get(args[1], {}).get(args[2], "null") + "\n")
    if len(args) == 4 and args[0] == "put" and args[1] in ("global", "system", "secure"):
        with dev.lock:
            dev.state.settings.setdefault(args[1], {})[args[2]] = args[3]
        return ShellOutput()
    return _err("usage:  settings [--user <USER_ID> | current] get namespace key")


def _dumpsys(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    with dev.lock:
        component = _component(dev.state.foreground)
    if args[:1] == ["window"]:
        return _text(
            f"WINDOW MANAGER WINDOWS (dumpsys window windows)\n"
            f"  mCurrentFocus=Window{{4f3c2a1 u0 {component}}}\n"
            f"  mFocusedApp=ActivityRecord{{8a1b2c3 u0 {component} t12}}\n"
        )
    if args[:1] == ["activity"]:
        return _text(f"  mResumedActivity: ActivityRecord{{8a1b2c3 u0 {component} t12}}\n")
    return _text("")


def _getprop(dev: SimulatedDevice, args: list[str]) -> ShellOutput:
    props = {
        "ro.product.model": dev.model,
        "ro.build.version.sdk": "33",
        "ro.build.version.release": "13",
        "ro.kernel.qemu": "1" if dev.serial.startswith("emulator-") else "",
        "ro.serialno": dev.serial,
    }
    if not args:
        return _text("".join(f"[{k}]: [{v}]\n" for k, v in props.items()))
    return _text(props.get(args[0], "") + "\n")


def _simple(dev: SimulatedDevice, argv: list[str], stdin: Stdin) -> ShellOutput:
    name, args = argv[0], argv[1:]
    if name == "input":
        return _input(dev, args)
    if name == "screencap":
        if args not in (["-p"], []):
            return _err("usage: screencap [-hp] [-d display-id] [FILENAME]")
        return ShellOutput(dev.screencap())
    if name == "wm" and args == ["size"]:
        return _text(f"Physical size: {dev.size[0]}x{dev.size[1]}\n")
    if name == "am":
        return _am(dev, args)
    if name == "monkey":
        return _monkey(dev, args)
    if name == "pm" and args[:2] == ["list", "packages"]:
        return _text("".join(f"package:{p}\n" for p in sorted(APPS)))
    if name == "settings":
        return _settings(dev, args)
    if name == "dumpsys":
        return _dumpsys(dev, args)
    if name == "getprop":
        return _getprop(dev, args)
    if name == "echo":
        return _text(" ".join(args) + "\n")
    if name == "true":
        return ShellOutput()
    if name == "false":
        return ShellOutput(code=1)
    if name == "sleep" and len(args) == 1:
        time.sleep(min(float(args[0]), 5.0))
        return ShellOutput()
    if name == "cat":
        if not args:
            return ShellOutput(stdin())
        out = b""
        with dev.lock:
            for path in args:
                if path not in dev.state.files:
                    return ShellOutput(out, f"cat: {path}: No such file or directory\n".encode(), 1)
                out += dev.state.files[path]
        return ShellOutput(out)
    if name == "test" and len(args) == 2 and args[0] in ("-e", "-f"):
        with dev.lock:
            return ShellOutput(code=0 if args[1] in dev.state.files else 1)
    if name == "rm":
        with dev.lock:
            for path in (a for a in args if not a.startswith("-")):
                dev.state.files.pop(path, None)
        return ShellOutput()
    if name == "sh" and len(args) == 2 and args[0] == "-c":
        return run_shell(dev, args[1], stdin)
    return ShellOutput(b"", f"/system/bin/sh: {name}: inaccessible or not found\n".encode(), 127)


def _filter(argv: list[str], data: bytes) -> ShellOutput:
    name, args = argv[0], argv[1:]
    lines = data.decode(errors="replace").splitlines(keepends=True)
    if name == "grep":
        flags = {a for a in args if a.startswith("-")}
        pattern = next(a for a in args if not a.startswith("-"))
        rx = re.compile(pattern, re.IGNORECASE if "-i" in flags else 0)
        hits = [ln for ln in lines if rx.search(ln)]
        out = "" if "-q" in flags else "".join(hits)
        return ShellOutput(out.encode(), b"", 0 if hits else 1)
    if name == "head":
        n = int(args[1]) if args[:1] == ["-n"] else 10
        return ShellOutput("".join(lines[:n]).encode())
    if name == "wc" and args == ["-l"]:
        return ShellOutput(f"{len(lines)}\n".encode())
    return ShellOutput(b"", f"/system/bin/sh: {name}: inaccessible or not found\n".encode(), 127)


def _pipeline(dev: SimulatedDevice, stages: list[list[str]], stdin: Stdin) -> ShellOutput:
    redirect: str | None = None
    first = stages[-1]
    if ">" in first:
        i = first.index(">")
        redirect, stages[-1] = first[i + 1], first[:i]
    result = _simple(dev, stages[0], stdin)
    errors = result.stderr
    for stage in stages[1:]:
        result = _filter(stage, result.stdout)
        errors += result.stderr
    if redirect is not None:
        with dev.lock:
            dev.state.files[redirect] = result.stdout
        return ShellOutput(b"", errors, result.code)
    return ShellOutput(result.stdout, errors, result.code)


def run_shell(dev: SimulatedDevice, command: str, stdin: Stdin = lambda: b"") -> ShellOutput:
    """Run `command` as the device's shell would; `stdin` is read only by commands that need it."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|>")
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as exc:
        return _err(f"/system/bin/sh: syntax error: {exc}", 2)
    out, err, code = b"", b"", 0
    connector = ";"
    stages: list[list[str]] = [[]]
    for token in [*tokens, ";"]:
        if token in (";", "&&", "||"):
            if stages[0]:
                run = connector == ";" or (connector == "&&") == (code == 0)
                if run:
                    r = _pipeline(dev, stages, stdin)
                    out, err, code = out + r.stdout, err + r.stderr, r.code
            stages, connector = [[]], token
        elif token == "|":
            stages.append([])
        else:
            stages[-1].append(token)
    return ShellOutput(out, err, code)
