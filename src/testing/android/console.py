"""A local Android emulator console (the telnet-style control port, 5554 for the first emulator).

Protocol as the emulator implements it (`android/console.cpp`, documented in "Send emulator
console commands"): on connect the emulator writes a banner asking for
``auth <auth_token>`` where the token is the content of ``~/.emulator_console_auth_token``,
then ``OK``. Each command is one line; success ends with a line ``OK``, failure with a line
``KO: <reason>``. Before authentication only ``help``, ``auth`` and ``quit``/``exit`` work.
``avd snapshot save|load|delete <name>`` and ``avd snapshot list`` manage VM snapshots;
``kill`` stops the emulator. Lines end in CRLF.
"""

from __future__ import annotations

import socket
import socketserver
import threading

from .device import SimulatedDevice

__all__ = ["FakeEmulatorConsole"]


class FakeEmulatorConsole:
    """The console of one simulated emulator; listens on 127.0.0.1 (ephemeral port by default)."""

    def __init__(self, device: SimulatedDevice, token: str, *, port: int = 0) -> None:
        self.device = device
        self.token = token
        self.commands: list[str] = []
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    owner._session(self.request, self.rfile)
                except (ConnectionError, OSError):
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", port), Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-console", daemon=True
        )

    def __enter__(self) -> FakeEmulatorConsole:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _session(self, sock: socket.socket, rfile: object) -> None:
        def say(*lines: str) -> None:
            sock.sendall("".join(f"{line}\r\n" for line in lines).encode())

        say(
            "Android Console: Authentication required",
            "Android Console: type 'auth <auth_token>' to authenticate",
            "Android Console: you can find your <auth_token> in ",
            "'~/.emulator_console_auth_token'",
            "OK",
        )
        authed = False
        for raw in rfile:  # type: ignore[attr-defined]
            line = raw.decode(errors="replace").strip()
            if not line:
                continue
            self.commands.append(line.split()[0] if line.startswith("auth") else line)
            words = line.split()
            if words[0] in ("quit", "exit"):
                return
            if words[0] == "auth":
                if len(words) == 2 and words[1] == self.token:
                    authed = True
                    say("Android Console: type 'help' for a list of commands", "OK")
                else:
                    say("KO: authentication token does not match ~/.emulator_console_auth_token")
                continue
            if words[0] == "help":
                say("Android console commands:", "    avd   control virtual device execution", "OK")
                continue
            if not authed:
                say("KO: unknown command, try 'help'")
                continue
            say(*self._command(words))
            if words == ["kill"]:
                return

    def _command(self, words: list[str]) -> list[str]:
        dev = self.device
        if words == ["kill"]:
            dev.online = False
            return ["OK: killing emulator, bye bye"]
        if words[:2] == ["avd", "snapshot"] and len(words) >= 3:
            op = words[2]
            if op == "list":
                names = sorted(dev.snapshots)
                return [f"{i}  {n}" for i, n in enumerate(names)] + ["OK"]
            if len(words) != 4:
                return [f"KO: 'avd snapshot {op}' needs a snapshot name"]
            name = words[3]
            if op == "save":
                dev.snapshot_save(name)
                return ["OK"]
            if op == "load":
                return ["OK"] if dev.snapshot_load(name) else [f"KO: snapshot '{name}' does not exist"]
            if op == "delete":
                with dev.lock:
                    found = dev.snapshots.pop(name, None)
                return ["OK"] if found is not None else [f"KO: snapshot '{name}' does not exist"]
        if words[:2] == ["avd", "name"]:
            return [dev.model, "OK"]
        return ["KO: unknown command, try 'help'"]
