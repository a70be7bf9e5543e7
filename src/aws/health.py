"""Is the desktop inside an instance ready? A running instance is not yet a usable desktop.

The default probe asks the in-VM server for a screenshot (the server answers before the
desktop session is up; a PNG means both are). Probes are plain async callables of the
server's base URL, so tests and other servers can supply their own.

The other ports OSWorld's controllers dial (Chrome DevTools, VLC's HTTP interface, noVNC)
have nothing listening until a task starts Chrome or VLC, so `probe_ports` asks the network,
not the service: at the instance's own address a connection accepted or actively refused
shows the security group lets the port through, one that times out shows it is blocked
(security groups drop, they do not refuse). Through ``connect_via`` only an accepted
connection counts: a forwarder that is not set up refuses too.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Literal

import httpx

from .address import PORT_ROLES, Reach, port_list
from .config import FleetConfig
from .errors import PortsBlocked

__all__ = ["HealthProbe", "HttpProbe", "PortState", "check_ports", "port_state", "probe_ports", "wait_healthy"]

_log = logging.getLogger("aws.health")

#: ``open``: accepted; ``closed``: refused (nothing listens yet, the path is open);
#: ``blocked``: no answer, or refused where only an accepted connection counts.
PortState = Literal["open", "closed", "blocked"]

#: ``await probe(base_url)`` is True when the desktop behind `base_url` is ready.
HealthProbe = Callable[[str], Awaitable[bool]]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class HttpProbe:
    """GET ``<base>/screenshot`` (with a bearer token if the server wants one) and expect a PNG."""

    def __init__(self, token: str | None = None, *, path: str = "/screenshot", timeout: float = 10.0) -> None:
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.path = path
        self.timeout = timeout

    def __repr__(self) -> str:  # never show the token
        return f"HttpProbe(path={self.path!r})"

    async def __call__(self, base_url: str) -> bool:
        try:
            async with httpx.AsyncClient(timeout=self.timeout, trust_env=False) as http:
                response = await http.get(base_url.rstrip("/") + self.path, headers=self._headers)
        except httpx.HTTPError:
            return False
        if response.status_code != 200:
            return False
        return self.path != "/screenshot" or response.content.startswith(_PNG_MAGIC)


async def wait_healthy(
    probe: HealthProbe,
    base_url: str,
    *,
    timeout: float,
    interval: float,
    alive: Callable[[], Awaitable[bool]] | None = None,
) -> bool:
    """Probe until healthy (True) or `timeout` passes or `alive()` says the instance died (False)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if await probe(base_url):
                return True
        except Exception:  # a faulty probe counts as not ready, never as ready
            pass
        if time.monotonic() + interval > deadline:
            return False
        if alive is not None and not await alive():
            return False
        await asyncio.sleep(interval)


async def port_state(host: str, port: int, *, timeout: float, direct: bool) -> PortState:
    """What a TCP connection to ``host:port`` says about the path there (see the module doc)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except TimeoutError:
        return "blocked"
    except ConnectionRefusedError:
        return "closed" if direct else "blocked"
    except OSError as exc:
        if exc.errno == errno.ECONNREFUSED:
            return "closed" if direct else "blocked"
        return "blocked"  # unreachable host or network: the packet found no way
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return "open"


async def probe_ports(reach: Reach, names: Iterable[str], *, timeout: float) -> dict[str, PortState]:
    """The state of each named port of `reach` (all probed at once)."""
    wanted = [n for n in names if n in reach.ports]
    states = await asyncio.gather(*(port_state(reach.host, reach.ports[n], timeout=timeout, direct=reach.direct)
                                    for n in wanted))
    return dict(zip(wanted, states, strict=True))


async def check_ports(cfg: FleetConfig, instance_id: str, reach: Reach, warned: set[str]) -> dict[str, str]:
    """Each port's state; a blocked required port raises `PortsBlocked` saying what to open (a
    blocked optional one is logged once per fleet, in `warned`)."""
    names = [n for n in cfg.offered_ports if n != "server"]
    states: dict[str, str] = {"server": "open", **await probe_ports(reach, names, timeout=cfg.port_timeout)}
    blocked = [n for n, s in states.items() if s == "blocked"]
    required = [n for n in blocked if n in cfg.required_ports]
    if required:
        where = "at " + ", ".join(f"{reach.host}:{reach.ports[n]}" for n in required) \
            + ("" if reach.direct else " (connect_via)")
        fix = (f"open {port_list(cfg.ports, cfg.offered_ports)} to this host in security group "
               f"{cfg.security_group_id}, as OSWorld's guideline does" if reach.direct else
               f"forward {port_list(cfg.ports, cfg.offered_ports)} of each instance (connect_via)")
        raise PortsBlocked(
            f"{instance_id} answers on its server but not on {port_list(cfg.ports, required)} {where}: {fix}; "
            f"or drop {', '.join(required)} from required_ports if no task needs "
            f"{' or '.join(PORT_ROLES[n] for n in required)}")
    for name in blocked:
        if name not in warned:
            warned.add(name)
            _log.warning("port %s (%s) of %s is blocked; tasks that need it are refused", reach.ports[name],
                         PORT_ROLES[name], instance_id)
    return states
