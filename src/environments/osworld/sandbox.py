"""The coding agent's `Sandbox` over a controller server's `/run_python*` and `/run_bash_script`.

Confinement is the server's business: our server runs the code under bubblewrap when started
with `--sandbox bwrap`; an OSWorld VM is itself the sandbox.
"""

from __future__ import annotations

from core.protocols import ExecResult, SandboxLanguage
from environments.osworld.client import OSWorldClient

__all__ = ["ServerSandbox"]


class ServerSandbox:
    """Runs python and bash through the server; other languages are reported as unavailable."""

    def __init__(self, client: OSWorldClient) -> None:
        self.client = client

    async def run(self, language: SandboxLanguage, code: str, *, timeout: float = 60.0) -> ExecResult:
        if language == "python":
            return await self.client.run_python(code, timeout=timeout)
        if language == "bash":
            return await self.client.run_bash_script(code, timeout=timeout)
        return ExecResult("error", -1, "", f"{language} is not available on this desktop")
