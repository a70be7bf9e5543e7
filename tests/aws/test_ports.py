"""Every port OSWorld's controllers dial is part of the health check and of ``connect_via``:
a blocked required port stops the fleet at its first launch, naming the ports to open; a
port through a forwarder must accept; OSWorld's controllers reach each port where the fleet
found it; a task needing a port the desktops lack is refused before it runs."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from aws_helpers import DesktopServer, LoopbackResolver, dropping_port, free_port
from pydantic import ValidationError

from aws import Fleet, FleetConfig, HttpProbe, InstanceRecord, PortsBlocked, Reach, server_address
from core.trajectory import Task
from environments.osworld.aws import AWSProvider
from environments.osworld.ports import task_ports
from environments.tasks.door import reach
from environments.tasks.errors import TaskRunError

pytestmark = [pytest.mark.desktop, pytest.mark.integration]

CHROME_TASK = Task.from_osworld({
    "id": "chrome-tabs", "instruction": "x",
    "config": [{"type": "chrome_open_tabs", "parameters": {"urls_to_open": ["https://example.com"]}}],
    "evaluator": {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                  "expected": {"type": "rule", "rules": {"type": "url", "urls": ["https://example.com"]}}},
})
VLC_TASK = Task.from_osworld({
    "id": "vlc-playing", "instruction": "x", "config": [],
    "evaluator": {"func": "is_vlc_playing", "result": {"type": "vlc_playing_info"},
                  "expected": {"type": "info", "file_path": "a.mp4"}},
})


def _fleet(cfg: FleetConfig, run_id: str, server: DesktopServer, resolver: Any) -> Fleet:
    return Fleet(cfg, run_id=run_id, probe=HttpProbe(server.token), resolve=resolver, owner="tester@host")


def test_which_ports_a_task_needs_is_read_from_osworlds_code() -> None:
    assert task_ports(CHROME_TASK) == {"chromium"}
    assert task_ports(VLC_TASK) == {"vlc"}
    assert task_ports(Task.from_osworld({"id": "t", "instruction": "x", "config": [],
                                         "evaluator": {"func": "infeasible"}})) == set()


async def test_a_blocked_devtools_port_stops_the_first_launch_naming_the_ports(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    ec2: Any, live: Any,
) -> None:  # fmt: skip
    with dropping_port() as blocked:
        resolver.ports["chromium"] = blocked
        fleet = _fleet(fleet_config, run_id, desktop_server, resolver)
        async with fleet:
            with pytest.raises(PortsBlocked) as raised:
                await fleet.launch("aws-1")
            assert live(ec2, run_id) == [] and fleet.stats.launched == 1  # not retried: the network is shared
    message = str(raised.value)
    assert f"not on 9222 (Chrome DevTools) at 127.0.0.1:{blocked}:" in message
    assert "open 5000 (the controller server), 9222 (Chrome DevTools), 8080 (VLC's HTTP interface) and 5910 " \
           f"(noVNC) to this host in security group {fleet_config.security_group_id}" in message
    assert "or drop chromium from required_ports" in message and "\n" not in message


async def test_an_unrequired_blocked_port_is_said_once_and_its_tasks_are_refused(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, resolver: LoopbackResolver,
    caplog: pytest.LogCaptureFixture, tmp_path: Any,
) -> None:  # fmt: skip
    caplog.set_level(logging.WARNING, logger="aws")
    cfg = fleet_config.model_copy(update={"required_ports": ["server", "chromium"]})
    with dropping_port() as blocked:
        resolver.ports["vlc"] = blocked
        async with AWSProvider(1, config=cfg, run_id=run_id, token=desktop_server.token, resolve=resolver) as pool:
            env = await pool.acquire()
            assert env.machine.ports == {"server": "open", "chromium": "closed", "vlc": "blocked", "vnc": "closed"}
            assert caplog.text.count("(VLC's HTTP interface)") == 1
            with pytest.raises(TaskRunError, match=r"task vlc-playing: needs VLC's HTTP interface \(port 8080\)"):
                await env.prepare_task(VLC_TASK, tmp_path / "rollout-0")
            # OSWorld's controllers reach the instance's own DevTools and VLC ports, where the fleet found
            # them: this server wants a token, so each port gets a door on the host's loopback.
            route = env.client.door_route()
            assert route.upstream == ("127.0.0.1", int(desktop_server.url.rsplit(":", 1)[1]))
            assert (route.chromium_port, route.vlc_port, route.browser_unreachable) == (
                resolver.ports["chromium"], blocked, None)
            async with reach(env.client) as endpoint:
                assert endpoint.host == "127.0.0.1" and endpoint.browser_unreachable is None
                assert len({endpoint.port, endpoint.chromium_port, endpoint.vlc_port}) == 3
            pool.release(env)


def test_connect_via_names_every_port_and_refuses_a_single_forwarded_one() -> None:
    instance = InstanceRecord("i-0abc", "us-east-1", "running", "t3.medium", "ami-1", "172.31.4.7", None, None)
    with pytest.raises(ValidationError) as raised:
        FleetConfig(connect_via="http://127.0.0.1:15000")
    text = str(raised.value)
    assert "reaches one port, but OSWorld's controllers also dial 9222 (Chrome DevTools), 8080 (VLC's HTTP " \
           "interface) and 5910 (noVNC)" in text and "{port}" in text
    forwarded = FleetConfig(connect_via={"server": "http://127.0.0.1:15000", "chromium": "http://127.0.0.1:19222",
                                         "vlc": "http://127.0.0.1:18080"})
    assert server_address(forwarded)(instance) == Reach(
        "127.0.0.1", {"server": 15000, "chromium": 19222, "vlc": 18080}, direct=False)
    named = FleetConfig(connect_via="http://{instance_id}.desktops.internal:{port}")
    assert server_address(named)(instance) == Reach(
        "i-0abc.desktops.internal", {"server": 5000, "chromium": 9222, "vlc": 8080, "vnc": 5910}, direct=False)
    with pytest.raises(ValidationError, match="connect_via has no URL for 8080 \\(VLC's HTTP interface\\)"):
        FleetConfig(connect_via={"server": "http://127.0.0.1:15000", "chromium": "http://127.0.0.1:19222"})
    with pytest.raises(ValidationError, match="on several hosts"):
        FleetConfig(connect_via={"server": "http://a:1", "chromium": "http://b:2", "vlc": "http://a:3"})
    with pytest.raises(ValidationError, match="speak plain http"):
        FleetConfig(connect_via="https://{instance_id}.desktops.internal:{port}")
    # Tasks without Chrome or VLC: the server alone, when the fleet is told so.
    alone = FleetConfig(connect_via={"server": "http://127.0.0.1:15000"}, required_ports=["server"])
    assert server_address(alone)(instance).ports == {"server": 15000}


async def test_through_connect_via_only_an_accepting_forward_counts(
    fleet_config: FleetConfig, run_id: str, desktop_server: DesktopServer, ec2: Any, live: Any,
) -> None:  # fmt: skip
    server = desktop_server.url
    cfg = fleet_config.model_copy(update={"connect_via": {
        "server": server, "chromium": f"http://127.0.0.1:{free_port()}", "vlc": server, "vnc": server}})
    async with _fleet(cfg, run_id, desktop_server, server_address(cfg)) as fleet:
        with pytest.raises(PortsBlocked, match=r"forward 5000 \(the controller server\), 9222 \(Chrome DevTools\)"):
            await fleet.launch("aws-1")  # nothing forwards the DevTools port: refused means blocked here
        assert live(ec2, run_id) == []
