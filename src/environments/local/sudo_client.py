#!/usr/bin/python3 -IS
"""``sudo`` inside a local desktop: asks the desktop's root broker (`rootd`) to run a command.

Installed read-only as ``/usr/local/bin/sudo`` in every desktop (standard library only, no
site packages, so it starts in milliseconds). It reads sudo's command line, sends the
command with this process's stdin, stdout and stderr (as descriptors), working folder,
umask and environment, answers the broker's password question (``-S``: a line of stdin,
else the terminal with echo off, as sudo does), relays the signals it gets to the command,
and exits with the command's status. The broker decides everything; this client is trusted
with nothing.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import NoReturn

SOCKET = "/run/sudo/broker.sock"
_HEAD = struct.Struct(">I")
_USAGE = """usage: sudo -h | -K | -k | -V
usage: sudo -v [-knS] [-p prompt] [-u user]
usage: sudo -l [-knS] [-p prompt] [-u user] [command]
usage: sudo [-bEHknPS] [-D directory] [-p prompt] [-u user] [VAR=value] [-i|-s] [command [arg ...]]"""
_NO_TTY = ("sudo: a terminal is required to read the password; either use the -S option to read "
           "from standard input or configure an askpass helper")
_FORWARDED = (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
_WITH_VALUE = {"-u": "user", "-p": "prompt", "-D": "chdir", "-g": "group", "-U": "other_user",
               "-C": "closefrom", "-T": "timeout", "-R": "chroot"}
_LONG = {"--stdin": "S", "--non-interactive": "n", "--login": "i", "--shell": "s", "--reset-timestamp": "k",
         "--remove-timestamp": "K", "--validate": "v", "--background": "b", "--list": "l", "--help": "h",
         "--version": "V", "--set-home": "H", "--preserve-env": "E", "--preserve-groups": "P"}
_LONG_VALUE = {"--user": "-u", "--prompt": "-p", "--chdir": "-D", "--group": "-g"}


def fail(message: str, status: int = 1) -> NoReturn:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    raise SystemExit(status)


def parse(argv: list[str]) -> tuple[set[str], dict[str, str], list[str], dict[str, str], object]:
    """(flags, valued options, command, VAR=value settings, preserve_env) as sudo's getopt reads them."""
    flags: set[str] = set()
    values: dict[str, str] = {}
    preserve: object = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if name == "--preserve-env" and eq:
                preserve = [v for v in value.split(",") if v]
            elif name in _LONG:
                flags.add(_LONG[name])
                if name == "--preserve-env":
                    preserve = True
            elif name in _LONG_VALUE:
                if not eq:
                    i += 1
                    if i >= len(argv):
                        fail(f"sudo: option '{name}' requires an argument\n{_USAGE}")
                    value = argv[i]
                values[_WITH_VALUE[_LONG_VALUE[name]]] = value
            else:
                fail(f"sudo: unrecognized option '{arg}'\n{_USAGE}")
            i += 1
            continue
        if not arg.startswith("-") or arg == "-":
            break
        letters = arg[1:]
        j = 0
        while j < len(letters):
            letter = letters[j]
            option = "-" + letter
            if option in _WITH_VALUE:
                value = letters[j + 1 :]
                if not value:
                    i += 1
                    if i >= len(argv):
                        fail(f"sudo: option requires an argument -- '{letter}'\n{_USAGE}")
                    value = argv[i]
                values[_WITH_VALUE[option]] = value
                break
            if letter == "A":
                fail("sudo: no askpass program specified, try setting SUDO_ASKPASS")
            if letter == "e":
                fail("sudo: sudoedit is not available on this desktop; run an editor with sudo instead")
            if letter not in "bEHiKklnPSsVvh":
                fail(f"sudo: invalid option -- '{letter}'\n{_USAGE}")
            flags.add(letter)
            if letter == "E":
                preserve = True
            j += 1
        i += 1
    command = argv[i:]
    settings: dict[str, str] = {}
    while command and "=" in command[0] and command[0].split("=", 1)[0].isidentifier():
        name, _, value = command.pop(0).partition("=")
        settings[name] = value
    return flags, values, command, settings, preserve


def send(sock: socket.socket, message: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode()
    frame = _HEAD.pack(len(data)) + data
    if fds:
        socket.send_fds(sock, [frame], fds)
    else:
        sock.sendall(frame)


def receive(sock: socket.socket) -> dict:
    def exactly(size: int) -> bytes:
        out = b""
        while len(out) < size:
            chunk = sock.recv(size - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    (size,) = _HEAD.unpack(exactly(_HEAD.size))
    return json.loads(exactly(size))


def read_stdin_line() -> str | None:
    """One line of stdin, read a byte at a time so the command gets the rest untouched."""
    data = b""
    while True:
        try:
            byte = os.read(0, 1)
        except OSError:
            byte = b""
        if not byte:
            return data.decode(errors="replace") if data else None
        if byte == b"\n":
            return data.decode(errors="replace")
        data += byte


def read_tty_line(prompt: str) -> str | None:
    """The password from the terminal, echo off (sudo's default without -S)."""
    import termios

    try:
        tty = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None
    try:
        os.write(tty, prompt.encode())
        old = termios.tcgetattr(tty)
        new = list(old)
        new[3] &= ~termios.ECHO
        termios.tcsetattr(tty, termios.TCSAFLUSH, new)
        try:
            data = b""
            while not data.endswith(b"\n"):
                chunk = os.read(tty, 1)
                if not chunk:
                    break
                data += chunk
        finally:
            termios.tcsetattr(tty, termios.TCSAFLUSH, old)
            os.write(tty, b"\n")
        return data.rstrip(b"\n").decode(errors="replace")
    finally:
        os.close(tty)


def main(argv: list[str]) -> int:
    flags, values, command, settings, preserve = parse(argv)
    if "h" in flags:
        print(_USAGE)
        return 0
    if "V" in flags:
        print("Sudo version 1.9.13 (a local desktop's root broker)")
        return 0
    if "l" in flags and not command:
        print("User user may run the following commands on desktop:\n    (ALL : ALL) ALL")
        return 0
    if not command and not flags & set("ikKsv"):
        fail(_USAGE)
    env = dict(os.environ)
    env.update(settings)
    request = {
        "argv": command,
        "env": env,
        "cwd": os.getcwd() if os.path.isdir(".") else "/",
        "umask": _umask(),
        "user": values.get("user", "root"),
        "login": "i" in flags,
        "shell": "s" in flags,
        "preserve_env": preserve,
        "settings": settings,
        "background": "b" in flags,
        "validate": "v" in flags,
        "reset": "k" in flags,
        "remove": "K" in flags,
        "noninteractive": "n" in flags,
        "chdir": values.get("chdir"),
    }
    target = values.get("user", "root")
    prompt = values.get("prompt", "[sudo] password for %p: ").replace("%p", "user").replace("%u", "user")
    prompt = prompt.replace("%H", "desktop").replace("%h", "desktop").replace("%U", target).replace("%%", "%")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(SOCKET)
    except OSError as exc:
        fail(f"sudo: cannot reach the desktop's root broker at {SOCKET}: {exc.strerror}")
    streams = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            streams.append(fd)
        except OSError:
            streams.append(os.open("/dev/null", os.O_RDWR))
    send(sock, request, streams)
    while True:
        try:
            message = receive(sock)
        except (EOFError, OSError, ValueError):
            fail("sudo: the desktop's root broker went away")
        if "need" in message:
            if message.get("retry"):
                sys.stderr.write("Sorry, try again.\n")
                sys.stderr.flush()
            if "S" in flags:
                sys.stderr.write(prompt)
                sys.stderr.flush()
                password = read_stdin_line()
            else:
                password = read_tty_line(prompt)
                if password is None and not message.get("retry"):
                    sys.stderr.write(_NO_TTY + "\n")
            send(sock, {"password": password})
        elif "error" in message:
            fail(str(message["error"]), int(message.get("status", 1)))
        elif "started" in message:
            for sig in _FORWARDED:
                signal.signal(sig, lambda number, _frame: _relay(sock, number))
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        elif "exit" in message:
            return int(message["exit"])


def _relay(sock: socket.socket, number: int) -> None:
    try:
        send(sock, {"signal": int(number)})
    except OSError:
        pass


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
