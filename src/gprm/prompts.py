"""The guide's prompt templates (Jinja2 files in `prompts/`), rendered strictly so a
missing value is an error rather than a silently empty prompt."""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["render"]


@cache
def _env() -> Environment:
    return Environment(loader=PackageLoader("gprm", "prompts"), undefined=StrictUndefined,
                       autoescape=False, trim_blocks=True, lstrip_blocks=True)


def render(template: str, **values: Any) -> str:
    """Render `prompts/<template>.j2`."""
    return _env().get_template(f"{template}.j2").render(**values).strip()
