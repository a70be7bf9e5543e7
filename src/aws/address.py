"""Where the host reaches an instance: its controller server and the other ports OSWorld's
controllers dial (Chrome DevTools, VLC's HTTP interface, noVNC), at the instance's own
private (or public) IP, or through ``connect_via`` for instances reachable only through
forwarded ports or a proxy that routes by name.

``connect_via`` is a URL template over ``{instance_id}``, ``{private_ip}``, ``{public_ip}``,
``{ip}`` and ``{port}``, where ``{port}`` is each port in turn
(``http://{instance_id}.desktops.internal:{port}``), or one template per port
(``{server: "http://127.0.0.1:15000", chromium: "http://127.0.0.1:19222", vlc:
"http://127.0.0.1:18080"}``). A single URL with a fixed port would send the DevTools and
VLC traffic to the host's own ports, so it is refused, with the ports to forward named.
Every port of one instance must be on one host (OSWorld's controllers take one ``vm_ip``)
and plain http (they speak nothing else). All of it is checked when the configuration is
read, so a typo fails before anything is launched.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

__all__ = [
    "PORT_NAMES",
    "PORT_ROLES",
    "TEMPLATE_FIELDS",
    "ConnectVia",
    "Reach",
    "check_connect_via",
    "fill",
    "needs_ip",
    "port_list",
]

#: The ports of an OSWorld desktop, by the name the configuration uses.
PORT_NAMES = ("server", "chromium", "vlc", "vnc")
#: What each port is for, as hints name it.
PORT_ROLES = {"server": "the controller server", "chromium": "Chrome DevTools", "vlc": "VLC's HTTP interface",
              "vnc": "noVNC"}
#: The names a ``connect_via`` template may use.
TEMPLATE_FIELDS = frozenset({"instance_id", "private_ip", "public_ip", "ip", "port"})

ConnectVia = str | dict[str, str]

_SAMPLE = {"instance_id": "i-0123456789abcdef0", "private_ip": "10.0.0.1", "public_ip": "203.0.113.1",
           "ip": "10.0.0.1"}


@dataclass(frozen=True)
class Reach:
    """How the host reaches one instance: one host, a port per service offered."""

    host: str
    ports: Mapping[str, int]
    #: The host is the instance's own address: a refused connection there still proves the
    #: security group lets the port through (nothing listens yet); through a forwarder it does not.
    direct: bool = True
    scheme: str = "http"

    @property
    def url(self) -> str:
        """The controller server's base URL."""
        return self._url(self.ports["server"])

    def _url(self, port: int) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{port}"


def port_list(ports: Mapping[str, int | None], names: Sequence[str] = PORT_NAMES) -> str:
    """``5000 (the controller server), 9222 (Chrome DevTools) and 8080 (VLC's HTTP interface)``."""
    items = [f"{ports[n]} ({PORT_ROLES[n]})" for n in names if ports.get(n) is not None]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _names(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


def fill(template: str, values: Mapping[str, str]) -> httpx.URL:
    return httpx.URL(template.format(**values).rstrip("/"))


def _check_template(template: str, what: str) -> None:
    unknown = sorted(_names(template) - TEMPLATE_FIELDS)
    if unknown:
        raise ValueError(f"connect_via {what} {template!r} uses {{{unknown[0]}}}: use only "
                         + ", ".join(f"{{{n}}}" for n in sorted(TEMPLATE_FIELDS)))
    url = fill(template, {**_SAMPLE, "port": "5000"})
    if url.scheme not in ("http", "https") or not url.host or url.path not in ("", "/") or url.query:
        raise ValueError(f"connect_via {what} {template!r} must be http://HOST:PORT (a template allowed), no path")
    if url.scheme != "http":
        raise ValueError(f"connect_via {what} {template!r}: OSWorld's controllers speak plain http to every port; "
                         f"use http://")


def check_connect_via(value: ConnectVia, ports: Mapping[str, int | None], required: Sequence[str]) -> None:
    """Raise ValueError (one line) unless `value` reaches every offered port on one host."""
    offered = [n for n in PORT_NAMES if ports.get(n) is not None]
    if isinstance(value, str):
        _check_template(value, "")
        if "port" not in _names(value) and len(offered) > 1:
            others = [n for n in offered if n != "server"]
            raise ValueError(
                f"connect_via {value!r} reaches one port, but OSWorld's controllers also dial "
                f"{port_list(ports, others)}: give one URL per port (connect_via: {{server: ..., "
                + ", ".join(f"{n}: ..." for n in others) + "}), or a template with {port}")
        return
    unknown = sorted(set(value) - set(PORT_NAMES))
    if unknown:
        raise ValueError(f"connect_via names port {unknown[0]!r}: use {', '.join(PORT_NAMES)}")
    missing = [n for n in required if n not in value]
    if missing:
        raise ValueError(f"connect_via has no URL for {port_list(ports, missing)}, which the fleet requires: add "
                         + ", ".join(f"{n}: http://HOST:PORT" for n in missing) + " (or drop it from required_ports)")
    hosts = set()
    for name, template in value.items():
        _check_template(template, name)
        hosts.add(fill(template, {**_SAMPLE, "port": str(ports.get(name) or 0)}).host)
    if len(hosts) > 1:
        raise ValueError(f"connect_via reaches one instance on several hosts ({', '.join(sorted(hosts))}): OSWorld's "
                         f"controllers take one address for all ports; forward them all to one host")


def needs_ip(value: ConnectVia) -> set[str]:
    """Which of the instance's addresses the templates use."""
    templates = [value] if isinstance(value, str) else list(value.values())
    return set().union(*(_names(t) for t in templates)) & {"private_ip", "public_ip", "ip"}
