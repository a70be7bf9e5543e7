"""The critics' prompt templates (Jinja2 files in `prompts/`), rendered strictly: a missing
variable is an error, not an empty string."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["render"]


@cache
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("themis", "prompts"),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def render(template: str, **values: Any) -> str:
    """Render `prompts/<template>.j2` with `values`."""
    return _env().get_template(f"{template}.j2").render(**values).strip()
