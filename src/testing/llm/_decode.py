"""Decoding helpers shared by the protocol servers."""

from __future__ import annotations

import base64
import binascii

from .base import WireError

__all__ = ["decode_b64", "decode_data_url"]


def decode_b64(data: object) -> bytes:
    if not isinstance(data, str):
        raise WireError(400, "image data must be a base64 string")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError(400, "image data is not valid base64") from None


def decode_data_url(url: object) -> tuple[str, bytes]:
    """(media type, bytes) of a `data:<type>;base64,<data>` URL."""
    if not isinstance(url, str) or not url.startswith("data:") or ";base64," not in url:
        raise WireError(400, "only base64 data URLs are supported for images")
    head, _, data = url.partition(";base64,")
    return head[len("data:"):] or "image/png", decode_b64(data)
