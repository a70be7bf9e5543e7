"""``fleet.connect_via``: instances reached through forwarded ports or a routing proxy. A
template fills in each instance's id and addresses (and each port); a template naming an
unknown field, carrying a path, or forwarding one port where the controllers dial several is
refused when the configuration is read, in one line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aws import FleetConfig, FleetError, InstanceRecord, Reach, server_address
from core.config import ConfigError
from core.protocols import EnvError
from environments.osworld.kind import AWSSettings, fleet_config
from runner.config import load_run_config


def _instance(private: str | None = "172.31.4.7", public: str | None = None) -> InstanceRecord:
    return InstanceRecord(id="i-0abc", region="us-east-1", state="running", instance_type="t3.xlarge",
                          image_id="ami-1", private_ip=private, public_ip=public, launched_at=None)


def test_the_instances_own_address_without_connect_via() -> None:
    assert server_address(FleetConfig())(_instance()).url == "http://172.31.4.7:5000"
    assert server_address(FleetConfig(public_ip=True))(_instance(public="203.0.113.9")).url == "http://203.0.113.9:5000"
    with pytest.raises(FleetError, match="no private IP"):
        server_address(FleetConfig())(_instance(private=None))


def test_connect_via_forwarded_ports_or_a_template() -> None:
    forwarded = FleetConfig(connect_via={"server": "http://127.0.0.1:15000/", "chromium": "http://127.0.0.1:19222",
                                         "vlc": "http://127.0.0.1:18080"}, vnc_port=None)
    assert server_address(forwarded)(_instance(private=None)) == Reach(  # no IP needed
        "127.0.0.1", {"server": 15000, "chromium": 19222, "vlc": 18080}, direct=False)
    named = FleetConfig(connect_via="http://{instance_id}.desktops.internal:{port}", server_port=5001)
    assert server_address(named)(_instance()).url == "http://i-0abc.desktops.internal:5001"
    routed = FleetConfig(connect_via="http://proxy-{private_ip}.vpc:{port}")
    assert server_address(routed)(_instance()).ports["chromium"] == 9222
    with pytest.raises(FleetError, match="no public IP"):
        server_address(FleetConfig(connect_via="http://{public_ip}:{port}"))(_instance())


@pytest.mark.parametrize(("template", "says"), [
    ("http://{host}:5000", "uses {host}"),
    ("http://127.0.0.1:15000/desktops", "no path"),
    ("ssh://bastion:22", "http://HOST:PORT"),
    ("http://127.0.0.1:15000", "reaches one port, but OSWorld's controllers also dial 9222 (Chrome DevTools)"),
])
def test_a_bad_connect_via_is_refused_in_one_line(template: str, says: str) -> None:
    with pytest.raises(ValidationError, match="connect_via"):
        FleetConfig(connect_via=template)
    with pytest.raises(ConfigError) as raised:  # refused when the configuration is loaded
        load_run_config([{"environment": {"kind": "aws", "fleet": {"connect_via": template}}}])
    line = str(raised.value)
    assert line.startswith("invalid config: environment.fleet: connect_via")
    assert says in line and len(line.splitlines()) == 1
    with pytest.raises(EnvError) as raised_late:  # settings made in code unchecked: the fleet's own check
        fleet_config(AWSSettings.model_construct(fleet={"connect_via": template}))
    assert says in str(raised_late.value) and len(str(raised_late.value).splitlines()) == 1
