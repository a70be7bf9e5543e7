"""What tasks need of a desktop: the OSWorld controller endpoints, as async methods.

`environments.osworld.OSWorldClient` satisfies this for local desktops and OSWorld VMs alike;
setup steps and getters take the client as a parameter and never know which one it is.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = ["CommandOutput", "TaskClient", "command_not_run", "command_output"]


@runtime_checkable
class TaskClient(Protocol):
    """The endpoints setup steps and getters call (`/setup/*`, `/execute`, `/file`, ...)."""

    async def execute(self, command: str | list[str], *, shell: bool = False) -> Any: ...

    async def launch(self, command: str | list[str], *, shell: bool = False) -> Any: ...

    async def open_file(self, path: str) -> Any: ...

    async def upload(self, path: str, data: bytes) -> Any: ...

    async def file(self, path: str) -> bytes | None: ...

    async def activate_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> Any: ...

    async def close_window(
        self, window_name: str, *, strict: bool = False, by_class: bool = False
    ) -> Any: ...

    async def screen_size(self) -> tuple[int, int]: ...


class CommandOutput(tuple[int, str, str]):
    """(returncode, stdout, stderr) of a command, whatever shape the client returned."""

    @property
    def returncode(self) -> int:
        return self[0]

    @property
    def stdout(self) -> str:
        return self[1]

    @property
    def stderr(self) -> str:
        return self[2]


def command_output(reply: Any) -> CommandOutput:
    """Normalise an `execute` reply: a `core.protocols.ExecResult` or OSWorld's JSON dict."""
    if isinstance(reply, dict):
        code = reply.get("returncode", reply.get("return_code", 0))
        return CommandOutput(
            (
                int(code if code is not None else -1),
                str(reply.get("output") or ""),
                str(reply.get("error") or ""),
            )
        )
    return CommandOutput((int(reply.returncode), str(reply.stdout or ""), str(reply.stderr or "")))


def command_not_run(reply: Any) -> str | None:
    """Why a command never ran to an exit (timeout, missing program), or None if it did.

    OSWorld's server answers such cases with ``{status: "error", message}`` and no return
    code; `OSWorldClient` turns them into status ``timeout``, or ``error`` with code -1 and
    the message as stderr.
    """
    if isinstance(reply, dict):
        if reply.get("status") == "error" and "returncode" not in reply and "return_code" not in reply:
            return str(reply.get("message") or "the server reported an error")
        return None
    if reply.status == "timeout":
        return "timed out"
    if reply.status == "error" and reply.returncode == -1 and not reply.stdout:
        return str(reply.stderr or "the server reported an error")
    return None
