"""The package's prompt templates (Jinja2 files in `prompts/`), rendered strictly: a
missing variable is an error, not an empty string."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["render"]


@cache
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("agent_s3", "prompts"),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


#: Platform names (as the prompts show them) whose screens are phones.
_MOBILE = frozenset({"Android"})


@cache
def _names() -> frozenset[str]:
    return frozenset(_env().list_templates())


def render(template: str, **values: Any) -> str:
    """Render `prompts/<template>.j2` with `values`; on a phone, `<template>_mobile.j2` if it exists."""
    if values.get("platform_name") in _MOBILE and f"{template}_mobile.j2" in _names():
        template = f"{template}_mobile"
    return _env().get_template(f"{template}.j2").render(**values).strip()
