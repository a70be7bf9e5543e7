"""The error a strict server answers for a request the real service refuses."""

from __future__ import annotations

__all__ = ["WireError"]


class WireError(Exception):
    """A request the real API would refuse; answered with `status` and the protocol's error
    body (`code`, `param` and the error `kind` where the real body carries them)."""

    def __init__(self, status: int, message: str, *, code: str | None = None, param: str | None = None,
                 kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.kind = kind
