"""The package's prompt templates (Jinja2 files in `prompts/`), rendered strictly, and
their version: a hash of the template text, so a changed prompt never reuses facts that
an older prompt wrote."""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["prompt_version", "render"]


@cache
def _env() -> Environment:
    return Environment(
        loader=PackageLoader("bjudge", "prompts"),
        undefined=StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def render(template: str, **values: Any) -> str:
    """Render `prompts/<template>.j2` with `values`."""
    return _env().get_template(f"{template}.j2").render(**values).strip()


@cache
def prompt_version(*templates: str) -> str:
    """Short hash of the named templates' text."""
    h = hashlib.sha256()
    folder = resources.files("bjudge").joinpath("prompts")
    for name in templates:
        h.update(name.encode())
        h.update(folder.joinpath(f"{name}.j2").read_bytes())
    return h.hexdigest()[:16]
