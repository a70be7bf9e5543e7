"""Where the host reaches an instance's in-VM server: its private (or public) IP, or a URL
template for instances reachable only through a forwarded port or a routing proxy.

A template names the instance with ``{instance_id}``, ``{private_ip}``, ``{public_ip}``,
``{ip}`` and ``{port}``; it is checked when the configuration is read, so a typo fails
before anything is launched rather than as a desktop that never becomes healthy.
"""

from __future__ import annotations

import string

import httpx

__all__ = ["TEMPLATE_FIELDS", "check_connect_via", "fill_connect_via", "needs_ip"]

#: The names a ``connect_via`` template may use.
TEMPLATE_FIELDS = frozenset({"instance_id", "private_ip", "public_ip", "ip", "port"})

_SAMPLE = {"instance_id": "i-0123456789abcdef0", "private_ip": "10.0.0.1", "public_ip": "203.0.113.1",
           "ip": "10.0.0.1", "port": "5000"}


def check_connect_via(template: str) -> None:
    """Raise ValueError (one line) unless `template` is an http(s) URL template over `TEMPLATE_FIELDS`."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    unknown = sorted(names - TEMPLATE_FIELDS)
    if unknown:
        raise ValueError(f"connect_via {template!r} uses {{{unknown[0]}}}: use only "
                         + ", ".join(f"{{{n}}}" for n in sorted(TEMPLATE_FIELDS)))
    url = httpx.URL(template.format(**_SAMPLE))
    if url.scheme not in ("http", "https") or not url.host or url.path not in ("", "/") or url.query:
        raise ValueError(f"connect_via {template!r} must be http(s)://HOST[:PORT] (a template allowed), no path")


def fill_connect_via(template: str, values: dict[str, str]) -> str:
    """The template with the instance's values, without a trailing slash."""
    return template.format(**values).rstrip("/")


def needs_ip(template: str) -> set[str]:
    """Which of the instance's addresses the template uses."""
    names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    return names & {"private_ip", "public_ip", "ip"}
