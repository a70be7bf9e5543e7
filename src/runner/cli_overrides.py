"""Options given on the command line, laid over the configuration as a nested mapping
(``rollout__max_steps`` sets ``rollout.max_steps``); options left out (None) are not set."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["option_overrides"]


def option_overrides(options: Mapping[str, Any] | None = None, /, **named: Any) -> dict[str, Any]:
    """The options given, by mapping or by name, as a nested mapping over the config."""
    out: dict[str, Any] = {}
    for dotted, value in {**(options or {}), **named}.items():
        if value is None:
            continue
        node = out
        *parents, last = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    return out
