"""What the fleet launches and how much of it: images, machine shape, network, time and money.

Every field can come from the run's configuration; the ones OSWorld's AWS provider reads
from the environment (`AWS_REGION`, `AWS_SUBNET_ID`, `AWS_SECURITY_GROUP_ID`,
`AWS_INSTANCE_TYPE`, `ENABLE_TTL`, `DEFAULT_TTL_MINUTES`) fill the fields left unset, so an
OSWorld ``.env`` works unchanged. Credentials are never part of it: boto3 finds them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .address import check_connect_via

__all__ = [
    "DEFAULT_IMAGES",
    "DEFAULT_PRICES",
    "ENV_VARS",
    "FleetConfig",
    "FleetConfigError",
]

#: OSWorld's published Ubuntu desktop images, per region and screen size.
DEFAULT_IMAGES: dict[str, dict[str, str]] = {
    "us-east-1": {"1920x1080": "ami-0d23263edb96951d8"},
    "ap-east-1": {"1920x1080": "ami-06850864d18fad836"},
}

#: On-demand Linux dollars per hour (us-east-1); only used for the estimated-cost cap.
DEFAULT_PRICES: dict[str, float] = {
    "t3.medium": 0.0416,
    "t3.large": 0.0832,
    "t3.xlarge": 0.1664,
    "t3.2xlarge": 0.3328,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "c5.xlarge": 0.17,
    "c5.2xlarge": 0.34,
    "c4.8xlarge": 1.591,
}

#: The environment variables OSWorld's provider reads, and the field each one fills.
ENV_VARS: dict[str, str] = {
    "AWS_REGION": "region",
    "AWS_SUBNET_ID": "subnet_id",
    "AWS_SECURITY_GROUP_ID": "security_group_id",
    "AWS_INSTANCE_TYPE": "instance_type",
    "ENABLE_TTL": "ttl_enabled",
    "DEFAULT_TTL_MINUTES": "ttl_minutes",
}


class FleetConfigError(ValueError):
    """A configuration the fleet cannot launch with; the message says what to set."""


class FleetConfig(BaseModel):
    """The fleet's settings; `resolved()` fills unset ones from OSWorld's variables."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    region: str | None = None
    """Region to launch in; unset reads AWS_REGION, else us-east-1."""
    images: dict[str, dict[str, str]] = Field(default_factory=lambda: {r: dict(m) for r, m in DEFAULT_IMAGES.items()})
    """AMI per region and screen size (``"1920x1080"``)."""
    screen: str = "1920x1080"
    """Screen size of the desktops, the key into `images`."""
    instance_type: str | None = None
    """EC2 instance type; unset reads AWS_INSTANCE_TYPE, else t3.xlarge (OSWorld's choice)."""
    disk_gb: int = Field(default=30, ge=8)
    """Root volume size (gp3)."""
    disk_iops: int = Field(default=4000, ge=3000)
    """Root volume IOPS (OSWorld's value; 3000 is gp3's free baseline)."""
    disk_throughput: int = Field(default=1000, ge=125)
    """Root volume throughput in MB/s (OSWorld's value; 125 is gp3's free baseline)."""
    subnet_id: str | None = None
    """Subnet of the desktops; unset reads AWS_SUBNET_ID, else the default VPC's."""
    security_group_id: str | None = None
    """Security group of the desktops; unset reads AWS_SECURITY_GROUP_ID."""
    public_ip: bool = False
    """Connect over the public IP (the host sits outside the VPC); private IP by default."""
    server_port: int = Field(default=5000, ge=1, le=65535)
    """Port of the in-VM controller server."""
    connect_via: str | None = None
    """Reach each instance's server at this URL instead of its own address: for instances
    reachable only through a forwarded port (``ssh -L 15000:10.0.1.5:5000 bastion``, an SSM
    port-forwarding session) or a proxy that routes by name. A template over
    ``{instance_id}``, ``{private_ip}``, ``{public_ip}``, ``{ip}`` (the one `public_ip`
    chooses) and ``{port}`` (`server_port`), e.g. ``http://127.0.0.1:15000`` or
    ``http://{instance_id}.desktops.internal:{port}``; scheme, host and port only."""
    ttl_enabled: bool | None = None
    """Give every instance a time to live; unset reads ENABLE_TTL, else true."""
    ttl_minutes: int | None = Field(default=None, ge=1)
    """Minutes an instance may live; unset reads DEFAULT_TTL_MINUTES, else 180."""
    max_instances: int = Field(default=40, ge=1)
    """Instances this fleet may hold at once; a launch beyond it is refused."""
    max_cost: float | None = Field(default=None, gt=0)
    """Dollars the fleet may commit (each live instance counted until its TTL ends)."""
    prices: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_PRICES))
    """Dollars per hour per instance type, for the cost cap."""
    launch_attempts: int = Field(default=3, ge=1)
    """Instances tried for one desktop before giving up (unhealthy ones are replaced)."""
    healthy_timeout: float = Field(default=600.0, gt=0)
    """Seconds an instance's server has to answer once the instance runs."""
    probe_interval: float = Field(default=5.0, gt=0)
    """Seconds between health probes."""
    running_delay: int = Field(default=5, ge=1)
    """Seconds between polls of the `instance_running` waiter."""
    running_attempts: int = Field(default=60, ge=1)
    """Polls of the `instance_running` waiter before the instance counts as failed."""
    endpoint_url: str | None = None
    """EC2 endpoint (an emulator); unset uses boto3's (AWS_ENDPOINT_URL_EC2 also works)."""

    @field_validator("connect_via")
    @classmethod
    def _check_connect_via(cls, value: str | None) -> str | None:
        if value is not None:
            check_connect_via(value)
        return value

    def resolved(self, environ: Mapping[str, str] | None = None) -> FleetConfig:
        """A copy with unset fields taken from OSWorld's variables, then from the defaults."""
        environ = os.environ if environ is None else environ
        updates: dict[str, object] = {}
        for var, field in ENV_VARS.items():
            raw = environ.get(var, "").strip()
            if getattr(self, field) is not None or not raw:
                continue
            updates[field] = _parse(var, field, raw)
        merged = self.model_copy(update=updates)
        defaults = {"region": "us-east-1", "instance_type": "t3.xlarge", "ttl_enabled": True, "ttl_minutes": 180}
        return merged.model_copy(
            update={k: v for k, v in defaults.items() if getattr(merged, k) is None}
        )

    def image_id(self) -> str:
        """The AMI for the configured region and screen, or a clear error."""
        region = self.region or "us-east-1"
        by_size = self.images.get(region)
        if not by_size:
            raise FleetConfigError(
                f"no desktop image for region {region}: add images.{region}.{self.screen}=ami-... "
                f"(known regions: {', '.join(sorted(self.images)) or 'none'})"
            )
        image = by_size.get(self.screen)
        if not image:
            raise FleetConfigError(
                f"no desktop image for {self.screen} in {region}: add images.{region}.{self.screen}=ami-... "
                f"(known sizes: {', '.join(sorted(by_size))})"
            )
        return image

    def price(self, instance_type: str) -> float | None:
        return self.prices.get(instance_type)

    @property
    def ttl_seconds(self) -> float | None:
        """Seconds an instance may live, or None when TTLs are off."""
        if self.ttl_enabled is False:
            return None
        return 60.0 * (self.ttl_minutes or 180)


def _parse(var: str, field: str, raw: str) -> object:
    if field == "ttl_enabled":
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise FleetConfigError(f"{var}={raw!r} is not a boolean: set it to true or false")
    if field == "ttl_minutes":
        try:
            value = int(raw)
        except ValueError:
            raise FleetConfigError(f"{var}={raw!r} is not a whole number of minutes") from None
        if value < 1:
            raise FleetConfigError(f"{var} must be at least 1 minute")
        return value
    return raw
