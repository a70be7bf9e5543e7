"""What the fleet launches and how much of it: images, machine shape, network, ports, time
and money.

The defaults are desktop-env's own (`aws.upstream`, read from the installed package's AWS
provider): its image table, instance type, public IP, root volume and TTL. Fields left unset
are filled, as desktop-env fills them, from the variables its provider reads
(`ENV_VARS`): the process environment first, then an OSWorld ``.env`` file (``env_file``,
else the first ``.env`` found from the current folder upward, as OSWorld's checkout keeps
it), never overriding a variable already set. ``AWS_SUBNET_ID`` and
``AWS_SECURITY_GROUP_ID`` are required, as desktop-env requires them: `resolved` refuses to
go on without either, in one line naming it. Credentials are never fields: boto3 finds
them, and a ``.env`` may supply them to the fleet's own session (`aws.dotenv`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .address import PORT_NAMES, ConnectVia, check_connect_via
from .upstream import upstream

__all__ = [
    "DEFAULT_PRICES",
    "ENV_VARS",
    "FleetConfig",
    "FleetConfigError",
    "PortName",
    "default_images",
]


def default_images() -> dict[str, dict[str, str]]:
    """desktop-env's image table: region -> screen ("1920x1080") -> AMI."""
    return {region: dict(sizes) for region, sizes in upstream().images.items()}


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

#: The variables desktop-env's AWS provider (and its setup controller) read, and the field
#: each fills. AWS_INSTANCE_TYPE is not one: desktop-env reads it only when a revert cannot
#: tell the old instance's type, which never happens here (the fleet always knows it).
ENV_VARS: dict[str, str] = {
    "AWS_REGION": "region",
    "AWS_SUBNET_ID": "subnet_id",
    "AWS_SECURITY_GROUP_ID": "security_group_id",
    "ENABLE_TTL": "ttl_enabled",
    "DEFAULT_TTL_MINUTES": "ttl_minutes",
    "AWS_SCHEDULER_ROLE_ARN": "scheduler_role_arn",
    "AWS_SCHEDULER_ROLE_NAME": "scheduler_role_name",
    "AWS_AUTO_CREATE_SCHEDULER_ROLE": "auto_create_scheduler_role",
    "PROXY_CONFIG_FILE": "proxy_config_file",
}
_BOOLEANS = ("ttl_enabled", "auto_create_scheduler_role")

PortName = Literal["server", "chromium", "vlc", "vnc"]
#: Ports a desktop must offer by default: every one OSWorld's controllers dial for tasks.
_REQUIRED: tuple[PortName, ...] = ("server", "chromium", "vlc")


class FleetConfigError(ValueError):
    """A configuration the fleet cannot launch with; the message says what to set."""


def _launch_default(*path: str | int) -> int:
    value: object = upstream().launch
    for key in path:
        value = value[key]  # type: ignore[index]
    return int(value)  # type: ignore[call-overload]


class FleetConfig(BaseModel):
    """The fleet's settings; `resolved()` fills unset ones from desktop-env's variables and defaults."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    region: str | None = None
    """Region to launch in; unset reads AWS_REGION, else us-east-1 (desktop-env's default)."""
    images: dict[str, dict[str, str]] = Field(default_factory=default_images)
    """AMI per region and screen size (``"1920x1080"``); desktop-env's table by default."""
    screen: str = "1920x1080"
    """Screen size of the desktops, the key into `images`."""
    instance_type: str | None = None
    """EC2 instance type; unset is desktop-env's (t3.medium in 1.0.2)."""
    instance_type_fallbacks: list[str] = Field(default_factory=list)
    """Types to try, in order, when EC2 has no capacity for `instance_type` (none by default)."""
    subnet_fallbacks: list[str] = Field(default_factory=list)
    """Subnets in other availability zones to try when a zone has no capacity (none by default)."""
    disk_gb: int = Field(default_factory=lambda: _launch_default("BlockDeviceMappings", 0, "Ebs", "VolumeSize"), ge=8)
    """Root volume size (gp3); desktop-env's by default."""
    disk_iops: int = Field(default_factory=lambda: _launch_default("BlockDeviceMappings", 0, "Ebs", "Iops"), ge=3000)
    """Root volume IOPS; desktop-env's by default."""
    disk_throughput: int = Field(
        default_factory=lambda: _launch_default("BlockDeviceMappings", 0, "Ebs", "Throughput"), ge=125)
    """Root volume throughput in MB/s; desktop-env's by default."""
    subnet_id: str | None = None
    """Subnet of the desktops; unset reads AWS_SUBNET_ID. Required, as desktop-env requires it."""
    security_group_id: str | None = None
    """Security group of the desktops; unset reads AWS_SECURITY_GROUP_ID. Required, as in desktop-env."""
    assign_public_ip: bool = Field(default_factory=lambda: bool(
        upstream().launch["NetworkInterfaces"][0]["AssociatePublicIpAddress"]))
    """Give each desktop a public IP (desktop-env does: without one, a subnet with no NAT has no internet)."""
    public_ip: bool = False
    """Connect over the public IP (the host sits outside the VPC); the private IP by default, as desktop-env."""
    server_port: int = Field(default_factory=lambda: upstream().ports["server"], ge=1, le=65535)
    """Port of the in-VM controller server."""
    chromium_port: int = Field(default_factory=lambda: upstream().ports["chromium"], ge=1, le=65535)
    """Chrome's DevTools port, which OSWorld's browser steps and getters dial."""
    vlc_port: int = Field(default_factory=lambda: upstream().ports["vlc"], ge=1, le=65535)
    """VLC's HTTP interface, which OSWorld's VLC getters dial."""
    vnc_port: int | None = Field(default_factory=lambda: upstream().aws_vnc_port or None, ge=1, le=65535)
    """noVNC of OSWorld's AWS image (null: not offered)."""
    required_ports: list[PortName] = Field(default_factory=lambda: list(_REQUIRED))
    """Ports that must be reachable before a desktop counts as healthy; a blocked one stops the run
    at start. Drop chromium or vlc only when no task needs Chrome or VLC (such tasks are then refused)."""
    port_timeout: float = Field(default=5.0, gt=0)
    """Seconds a connection to a port may take before the port counts as blocked."""
    connect_via: ConnectVia | None = None
    """Reach the instances through forwarded ports or a routing proxy instead of their own
    address: a template over ``{instance_id}``, ``{private_ip}``, ``{public_ip}``, ``{ip}`` and
    ``{port}`` (each port in turn), or one URL template per port (``{server: ..., chromium:
    ..., vlc: ...}``); see `aws.address`."""
    ttl_enabled: bool | None = None
    """Give every instance a time to live; unset reads ENABLE_TTL, else desktop-env's default (on)."""
    ttl_minutes: int | None = Field(default=None, ge=1)
    """Minutes an instance may live; unset reads DEFAULT_TTL_MINUTES, else desktop-env's default (180)."""
    ttl_schedule: bool = True
    """End each instance at its TTL with an EventBridge Scheduler schedule, as desktop-env does."""
    scheduler_role_arn: str | None = None
    """Role the scheduler assumes; unset reads AWS_SCHEDULER_ROLE_ARN, else derived from the role name."""
    scheduler_role_name: str | None = None
    """Unset reads AWS_SCHEDULER_ROLE_NAME, else desktop-env's ``osworld-scheduler-ec2-terminate``."""
    auto_create_scheduler_role: bool | None = None
    """Create that role when missing; unset reads AWS_AUTO_CREATE_SCHEDULER_ROLE, else true."""
    iam_propagation_wait: float = Field(default=8.0, ge=0)
    """Seconds to wait after resolving the role, for IAM to propagate (desktop-env waits 8)."""
    ttl_user_data: bool = False
    """Also power each instance off at its TTL from user data (cloud-init; desktop-env no longer does)."""
    tag_instances: bool = True
    """Tag instances (run, owner, expiry) so `agent-s3 aws reap` finds them; needs ec2:CreateTags."""
    env_file: str | None = None
    """An OSWorld ``.env`` to read; unset finds the first ``.env`` from the current folder upward."""
    proxy: Literal["auto", "on", "off"] = "auto"
    """OSWorld's proxy for tasks marked ``proxy: true``: on with a proxy pool file (``auto``: when one exists)."""
    proxy_config_file: str | None = None
    """OSWorld's proxy pool file; unset reads PROXY_CONFIG_FILE, else desktop-env's default path."""
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
    running_delay: int = Field(default=15, ge=1)
    """Seconds between polls of the `instance_running` waiter (botocore's, as desktop-env uses it)."""
    running_attempts: int = Field(default=40, ge=1)
    """Polls of the `instance_running` waiter before the instance counts as failed."""
    watch_interval: float = Field(default=15.0, gt=0)
    """Seconds between checks that every live instance still runs (in use or not)."""
    api_max_attempts: int = Field(default=5, ge=1)
    """Attempts boto3 makes for one EC2 call (its standard retry mode)."""
    endpoint_url: str | None = None
    """EC2 endpoint (an emulator); unset uses boto3's (AWS_ENDPOINT_URL_EC2 also works)."""

    @model_validator(mode="after")
    def _check(self) -> FleetConfig:
        if self.connect_via is not None:
            check_connect_via(self.connect_via, self.ports, list(self.required_ports))
        if "server" not in self.required_ports:
            raise ValueError("required_ports must include server: nothing works without the controller server")
        if self.vnc_port is None and "vnc" in self.required_ports:
            raise ValueError("required_ports names vnc but vnc_port is null: set vnc_port or drop vnc")
        if self.public_ip and not self.assign_public_ip and self.connect_via is None:
            raise ValueError("public_ip (connect over the public IP) needs assign_public_ip: true")
        return self

    @property
    def ports(self) -> dict[str, int | None]:
        return {"server": self.server_port, "chromium": self.chromium_port, "vlc": self.vlc_port,
                "vnc": self.vnc_port}

    def resolved(self, environ: Mapping[str, str] | None = None) -> FleetConfig:
        """A copy with unset fields taken from desktop-env's variables (`environ`, by default the
        process environment and then the ``.env`` file), then from its defaults; refuses, in one
        line, a fleet without a subnet or a security group."""
        if environ is None:
            from .dotenv import osworld_environ

            environ = osworld_environ(self.env_file)
        updates: dict[str, object] = {}
        for var, name in ENV_VARS.items():
            raw = environ.get(var, "").strip()
            if getattr(self, name) is not None or not raw:
                continue
            updates[name] = _parse(var, name, raw)
        merged = self.model_copy(update=updates)
        up = upstream()
        defaults: dict[str, object] = {
            "region": "us-east-1", "instance_type": up.instance_type, "ttl_enabled": up.ttl_enabled,
            "ttl_minutes": up.ttl_minutes, "auto_create_scheduler_role": True,
            "scheduler_role_name": up.env_defaults.get("AWS_SCHEDULER_ROLE_NAME") or "osworld-scheduler-ec2-terminate",
            "proxy_config_file": up.proxy_config_file,
        }
        merged = merged.model_copy(update={k: v for k, v in defaults.items() if getattr(merged, k) is None})
        for var, name in (("AWS_SUBNET_ID", "subnet_id"), ("AWS_SECURITY_GROUP_ID", "security_group_id")):
            if not getattr(merged, name):
                what = "subnet" if name == "subnet_id" else "security group"
                raise FleetConfigError(
                    f"{var} is not set: the desktops need a {what} (desktop-env's AWS provider refuses to start "
                    f"without one too); set environment.fleet.{name}, or {var} in the environment or an OSWorld .env")
        return merged

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

    def launch_choices(self) -> list[tuple[str, str]]:
        """(subnet, instance type) pairs in the order a capacity shortage tries them."""
        subnets = [self.subnet_id or "", *self.subnet_fallbacks]
        types = [self.instance_type or upstream().instance_type, *self.instance_type_fallbacks]
        return [(s, t) for s in dict.fromkeys(subnets) for t in dict.fromkeys(types)]

    @property
    def ttl_seconds(self) -> float | None:
        """Seconds an instance may live, or None when TTLs are off."""
        if self.ttl_enabled is False:
            return None
        return 60.0 * (self.ttl_minutes or upstream().ttl_minutes)

    @property
    def offered_ports(self) -> list[str]:
        return [n for n in PORT_NAMES if self.ports.get(n) is not None]


def _parse(var: str, name: str, raw: str) -> object:
    if name in _BOOLEANS:
        # desktop-env reads `value.lower() == "true"`: only true is on; anything but false is refused
        # here rather than read as off.
        lowered = raw.lower()
        if lowered in ("true", "false"):
            return lowered == "true"
        raise FleetConfigError(f"{var}={raw!r}: desktop-env reads only true as on (and anything else as off); "
                               f"write true or false")
    if name == "ttl_minutes":
        try:
            value = int(raw)
        except ValueError:
            raise FleetConfigError(f"{var}={raw!r} is not a whole number of minutes") from None
        if value < 1:
            raise FleetConfigError(f"{var} must be at least 1 minute")
        return value
    return raw

