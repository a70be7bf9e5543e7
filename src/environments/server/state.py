"""What every request handler shares: settings, children, the screen, the executor, the sandbox."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aiohttp import web

from environments.server.atspi_worker import AtspiWorker
from environments.server.capture import ScreenCapture
from environments.server.config import ServerConfig, child_env
from environments.server.executor import WarmExecutor
from environments.server.processes import ProcessRegistry
from environments.server.sandbox import BwrapSandbox

__all__ = ["STATE", "ServerState"]


@dataclass
class ServerState:
    """Long-lived resources of one server process."""

    config: ServerConfig
    env: dict[str, str]
    registry: ProcessRegistry
    capture: ScreenCapture
    executor: WarmExecutor
    sandbox: BwrapSandbox | None
    atspi: AtspiWorker
    python: str = sys.executable
    _launched: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def create(cls, config: ServerConfig, environ: Mapping[str, str] | None = None) -> ServerState:
        env = child_env(os.environ if environ is None else environ)
        registry = ProcessRegistry()
        sandbox = None
        if config.sandbox == "bwrap" and config.sandbox_home is not None:
            uid, gid = (config.run_as.uid, config.run_as.gid) if config.run_as else (65534, 65534)
            sandbox = BwrapSandbox(
                config.sandbox_home,
                uid=uid,
                gid=gid,
                hidden=config.sandbox_hidden,
                display=env.get("DISPLAY"),
                xauthority=env.get("XAUTHORITY"),
                registry=registry,
            )
        return cls(
            config=config,
            env=env,
            registry=registry,
            capture=ScreenCapture(),
            executor=WarmExecutor(env=env, run_as=config.run_as, registry=registry),
            sandbox=sandbox,
            atspi=AtspiWorker(env=env, run_as=config.run_as, registry=registry),
        )

    def launch(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        """Start a program without waiting (own process group, killed when the server exits).

        The handle lets a caller notice a launcher that failed at once (see /setup/open_file).
        """
        self._launched = [p for p in self._launched if p.poll() is None]
        command = self.config.run_as.wrap(argv) if self.config.run_as is not None else list(argv)
        proc = subprocess.Popen(
            command,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._launched.append(proc)
        self.registry.add(proc.pid)
        return proc

    async def close(self) -> None:
        """Kill every child group and release the X connections; safe to call twice."""
        await self.executor.close()
        await self.atspi.close()
        self.registry.kill_all()
        for proc in self._launched:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)
        self._launched.clear()
        await self.capture.close()


STATE = web.AppKey("state", ServerState)
