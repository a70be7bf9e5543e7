"""The ``osworld`` and ``aws`` kinds: OSWorld's protocol over HTTP, on a server given by
URL or on OSWorld's images launched on EC2.

A server given by URL is one environment that cannot be reverted from here (whoever runs
it owns its snapshots); its platform is what the server says. The EC2 fleet starts,
reverts and terminates its own instances (`environments.osworld.aws`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, Field, SecretStr, ValidationError

from aws import FleetConfig
from core.config import Checks, redact_urls
from core.protocols import EnvError, Platform

from ..kinds import EnvironmentKind, EnvironmentSettings, PoolRequest, register
from ..pool import EnvironmentPool, FixedPool
from .aws import AWSProvider
from .client import OSWorldClient
from .desktop import OSWorldDesktop

__all__ = ["AWSSettings", "OSWorldSettings", "fleet_config"]

#: What OSWorld's ``/platform`` answers → the platform the worker is told.
_PLATFORMS: dict[str, Platform] = {"linux": "ubuntu", "windows": "windows", "android": "android"}


class OSWorldSettings(EnvironmentSettings):
    """A running server that speaks OSWorld's protocol (an OSWorld VM, or this project's server)."""

    kind: Literal["osworld"] = "osworld"
    url: str | None = None
    """Base URL of the OSWorld-protocol server, e.g. http://10.0.0.5:5000."""
    token: SecretStr | None = None
    """Bearer token of the server (each instance's on a fleet), if it wants one."""
    action_timeout: float = Field(default=30.0, gt=0)
    """Seconds one GUI action may run."""

    def where(self) -> str:
        return redact_urls(str(self.url))

    def check(self) -> None:
        if not self.url:
            raise EnvError("--env osworld needs the server's address: pass --url http://HOST:PORT")


class AWSSettings(EnvironmentSettings):
    """OSWorld's desktop images launched on EC2 (see `aws.FleetConfig`)."""

    kind: Literal["aws"] = "aws"
    token: SecretStr | None = None
    """Bearer token of the server (each instance's on a fleet), if it wants one."""
    fleet: Annotated[dict[str, Any], Checks(lambda data: FleetConfig, "`aws.FleetConfig`", partial=True,
                                            label="fleet")] = Field(default_factory=dict)
    """The fleet's settings (region, images, instance_type, ...); unset ones come from
    OSWorld's environment variables."""
    action_timeout: float = Field(default=30.0, gt=0)
    """Seconds one GUI action may run."""

    def where(self) -> str:
        region = self.fleet.get("region")
        return "OSWorld images on EC2" + (f" in {region}" if region else "")

    def checked_sections(self) -> dict[str, BaseModel]:
        return {"fleet": fleet_config(self)}


def fleet_config(cfg: AWSSettings) -> FleetConfig:
    """The fleet's settings, checked; one line naming the first problem otherwise."""
    try:
        return FleetConfig.model_validate(cfg.fleet)
    except ValidationError as e:
        raise EnvError(f"environment.fleet is not a valid fleet configuration: {e.errors()[0]['msg']}") from None


@asynccontextmanager
async def open_osworld_pool(cfg: OSWorldSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    """The one server at `cfg.url`, once it answers."""
    cfg.check()
    token = cfg.token.get_secret_value() if cfg.token else None
    client = OSWorldClient(str(cfg.url), token=token)
    try:
        await client.wait_ready(timeout=30.0)
        platform = _PLATFORMS.get((await client.platform()).strip().lower(), "ubuntu")
        env = OSWorldDesktop(client, name="osworld", platform=platform, with_sandbox=cfg.sandbox,
                             action_timeout=cfg.action_timeout)
        yield FixedPool(env)
    finally:
        await client.aclose()


@asynccontextmanager
async def open_aws_pool(cfg: AWSSettings, request: PoolRequest) -> AsyncIterator[EnvironmentPool]:
    """A fleet of `request.size` instances tagged with the run (found again by ``agent-s3 aws reap``)."""
    token = cfg.token.get_secret_value() if cfg.token else None  # the images' servers may want one
    async with AWSProvider(request.size, config=fleet_config(cfg), run_id=request.run_id, token=token,
                           with_sandbox=cfg.sandbox, action_timeout=cfg.action_timeout) as fleet:
        yield cast(EnvironmentPool, fleet)  # lends and takes back only its own AWSDesktops


register(EnvironmentKind(
    name="osworld",
    settings=OSWorldSettings,
    description="a server speaking OSWorld's protocol at --url",
    open_pool=open_osworld_pool,
    platforms=("ubuntu", "windows"),
))
register(EnvironmentKind(
    name="aws",
    settings=AWSSettings,
    description="OSWorld's images launched on EC2",
    open_pool=open_aws_pool,
    platforms=("ubuntu", "windows"),
))
