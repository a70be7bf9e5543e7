"""``fleet.connect_via``: instances reached through a forwarded port or a routing proxy. A
template fills in each instance's id and addresses; a template naming an unknown field or
carrying a path is refused when the configuration is read, in one line."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from aws import FleetConfig, FleetError, InstanceRecord, server_address
from core.protocols import EnvError
from environments.osworld.kind import AWSSettings, fleet_config


def _instance(private: str | None = "172.31.4.7", public: str | None = None) -> InstanceRecord:
    return InstanceRecord(id="i-0abc", region="us-east-1", state="running", instance_type="t3.xlarge",
                          image_id="ami-1", private_ip=private, public_ip=public, launched_at=None)


def test_the_instances_own_address_without_connect_via() -> None:
    assert server_address(FleetConfig())(_instance()) == "http://172.31.4.7:5000"
    assert server_address(FleetConfig(public_ip=True))(_instance(public="203.0.113.9")) == "http://203.0.113.9:5000"
    with pytest.raises(FleetError, match="no private IP"):
        server_address(FleetConfig())(_instance(private=None))


def test_connect_via_a_forwarded_port_or_a_template() -> None:
    forwarded = FleetConfig(connect_via="http://127.0.0.1:15000/")
    assert server_address(forwarded)(_instance(private=None)) == "http://127.0.0.1:15000"  # no IP needed
    named = FleetConfig(connect_via="https://{instance_id}.desktops.internal:{port}", server_port=5001)
    assert server_address(named)(_instance()) == "https://i-0abc.desktops.internal:5001"
    routed = FleetConfig(connect_via="http://proxy-{private_ip}.vpc:8080")
    assert server_address(routed)(_instance()) == "http://proxy-172.31.4.7.vpc:8080"
    with pytest.raises(FleetError, match="no public IP"):
        server_address(FleetConfig(connect_via="http://{public_ip}:{port}"))(_instance())


@pytest.mark.parametrize(("template", "says"), [
    ("http://{host}:5000", "uses {host}"),
    ("http://127.0.0.1:15000/desktops", "no path"),
    ("ssh://bastion:22", "http(s)://HOST"),
])
def test_a_bad_connect_via_is_refused_in_one_line(template: str, says: str) -> None:
    with pytest.raises(ValidationError, match="connect_via"):
        FleetConfig(connect_via=template)
    with pytest.raises(EnvError) as raised:
        fleet_config(AWSSettings(fleet={"connect_via": template}))
    assert says in str(raised.value) and len(str(raised.value).splitlines()) == 1
