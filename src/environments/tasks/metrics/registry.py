"""The metric table: name → function plus the options it understands.

A metric is a plain synchronous function of local values (strings, host file paths, rule
dicts) returning a score in [0, 1]. Options a metric does not understand make it
unsupported for that task rather than silently ignored, so a score never rests on a check
this runner skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["METRICS", "Metric", "metric", "unsupported_reason"]


@dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[..., float]
    #: Option names the function accepts as keyword arguments.
    options: frozenset[str] = frozenset()
    #: Optional deeper check of option values; returns why they are unsupported, or None.
    check: Callable[[dict[str, Any]], str | None] | None = field(default=None)


METRICS: dict[str, Metric] = {}


def metric(
    name: str, options: tuple[str, ...] = (), check: Callable[[dict[str, Any]], str | None] | None = None
) -> Callable[[Callable[..., float]], Callable[..., float]]:
    """Register a metric function under OSWorld's name for it."""

    def register(fn: Callable[..., float]) -> Callable[..., float]:
        METRICS[name] = Metric(name, fn, frozenset(options), check)
        return fn

    return register


def unsupported_reason(name: str, options: dict[str, Any]) -> str | None:
    """Why `name` with `options` cannot be scored here, or None when it can."""
    found = METRICS.get(name)
    if found is None:
        return "no such metric here"
    unknown = sorted(set(options) - found.options)
    if unknown:
        return f"options {', '.join(unknown)} not supported"
    return found.check(options) if found.check is not None else None
