"""The fleet's estimated cost, and the cap that stops new launches before it is exceeded.

The cap bounds the worst case: a live instance is counted as if it ran until its TTL ends
(nothing outlives that, even after a crash), a terminated one at what it actually ran
(per-second billing, one minute at least). So a refused launch is one that *could* push the
run over budget, whatever happens to this host afterwards.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

__all__ = ["MIN_BILLED_SECONDS", "CostBook", "CostCapReached"]

#: EC2 bills Linux instances per second with a one-minute minimum.
MIN_BILLED_SECONDS = 60.0
#: How far ahead a live instance is reserved when TTLs are off.
_NO_TTL_RESERVE_SECONDS = 3600.0


class CostCapReached(RuntimeError):
    """A launch was refused because it could take the fleet over its cost cap."""


@dataclass
class _Entry:
    price: float
    launched_at: float
    reserve_until: float
    ended_at: float | None = None


class CostBook:
    """Dollars per instance: actual for ended ones, reserved-until-TTL for live ones."""

    def __init__(self, cap: float | None, prices: dict[str, float], ttl_seconds: float | None) -> None:
        self.cap = cap
        self.prices = dict(prices)
        self.ttl_seconds = ttl_seconds
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def _reserve_seconds(self) -> float:
        return self.ttl_seconds if self.ttl_seconds is not None else _NO_TTL_RESERVE_SECONDS

    def price(self, instance_type: str) -> float:
        price = self.prices.get(instance_type)
        if price is None:
            raise CostCapReached(
                f"no hourly price for {instance_type}, so the cost cap cannot be checked: "
                f"add prices.{instance_type}=DOLLARS_PER_HOUR to the fleet configuration"
            )
        return price

    def check(self, instance_type: str, now: float, *, pending: int = 0) -> None:
        """Raise `CostCapReached` if one more instance (after `pending` launches still on the
        wire, of the same type) could exceed the cap."""
        if self.cap is None:
            return
        price = self.price(instance_type)
        with self._lock:
            committed = self._committed(now)
        extra = (1 + pending) * price * self._reserve_seconds() / 3600.0
        if committed + extra > self.cap + 1e-9:
            raise CostCapReached(
                f"launching another {instance_type} could bring the fleet's estimated cost to "
                f"${committed + extra:.2f}, over its ${self.cap:.2f} cap: raise max_cost, "
                f"shorten ttl_minutes or run fewer desktops"
            )

    def start(self, instance_id: str, instance_type: str, now: float) -> None:
        price = self.prices.get(instance_type, 0.0)
        with self._lock:
            self._entries[instance_id] = _Entry(price, now, now + self._reserve_seconds())

    def end(self, instance_id: str, now: float) -> None:
        with self._lock:
            entry = self._entries.get(instance_id)
            if entry is not None and entry.ended_at is None:
                entry.ended_at = now

    def _committed(self, now: float) -> float:
        total = 0.0
        for e in self._entries.values():
            if e.ended_at is not None:
                seconds = max(MIN_BILLED_SECONDS, e.ended_at - e.launched_at)
            else:
                seconds = max(e.reserve_until, now) - e.launched_at
            total += e.price * seconds / 3600.0
        return total

    def committed(self, now: float) -> float:
        """Dollars the fleet may end up paying for what it launched so far."""
        with self._lock:
            return self._committed(now)

    def spent(self, now: float) -> float:
        """Dollars the fleet's instances have cost up to `now`."""
        with self._lock:
            return sum(
                e.price * max(MIN_BILLED_SECONDS, (e.ended_at or now) - e.launched_at) / 3600.0
                for e in self._entries.values()
            )
