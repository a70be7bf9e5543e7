"""A pool of the adb server's phones that lets a lost one go.

A phone lost mid-rollout is not replaced (emulators belong to whoever started them): when
its next loan finds it offline it leaves the pool, and a loan with no device left online is
an `EnvError`, which the wide strategy records as a lost attempt. A device that comes back
online before that loan is simply lent again.
"""

from __future__ import annotations

import logging
from typing import cast

from core.protocols import EnvError, Environment, EnvironmentLost

from .environment import AndroidEnvironment
from .provider import AndroidProvider

__all__ = ["AndroidPool"]

_log = logging.getLogger("environments.android")


class AndroidPool:
    """`AndroidProvider` seen as a pool of plain environments; devices found offline at a
    loan leave the pool instead of failing rollout after rollout."""

    def __init__(self, provider: AndroidProvider) -> None:
        self.provider = provider
        self.lost: dict[str, str] = {}
        """Devices that left the pool: environment name → why."""

    def _left(self) -> int:
        return sum(1 for e in self.provider.environments if e.name not in self.lost)

    async def acquire(self) -> Environment:
        while True:
            if self._left() == 0:
                raise EnvError(
                    "no Android device of the pool is online any more ("
                    + "; ".join(f"{name}: {why}" for name, why in self.lost.items())
                    + "); restart the emulators and run again"
                )
            env = await self.provider.acquire()
            try:
                state = await env.link.state()
            except EnvironmentLost as e:
                state, why = "unreachable", str(e)
            else:
                why = f"adb reports it {state}"
            if state == "device":
                return env
            _log.warning("android device %s left the pool: %s", env.serial, why)
            self.lost[env.name] = why

    def release(self, env: Environment) -> None:
        if env.name not in self.lost:
            self.provider.release(cast(AndroidEnvironment, env))  # it lends only its own
