"""Prompt templates kept beside the code that uses them: Jinja2 files in a package's
`prompts/` folder, rendered strictly (a missing value is an error, never a silently empty
prompt), with a version hash so caches keyed on a prompt notice when its text changes."""

from __future__ import annotations

import hashlib
from functools import cached_property
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["PromptTemplates"]


class PromptTemplates:
    """The templates of one package, e.g. ``PromptTemplates("themis")``.

    `variants` maps a value of `variant_key` to a suffix: with
    ``variants={"Android": "mobile"}`` and ``variant_key="platform_name"``, rendering
    ``worker_system`` for Android uses ``worker_system_mobile.j2`` when that file exists.
    """

    def __init__(
        self, package: str, *, variant_key: str | None = None, variants: dict[str, str] | None = None
    ) -> None:
        self.package = package
        self.variant_key = variant_key
        self.variants = dict(variants or {})

    @cached_property
    def environment(self) -> Environment:
        return Environment(
            loader=PackageLoader(self.package, "prompts"),
            undefined=StrictUndefined,
            autoescape=False,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=False,
        )

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(self.environment.list_templates())

    def resolve(self, template: str, values: dict[str, Any]) -> str:
        """The template file that `render` uses for these values."""
        if self.variant_key is not None:
            suffix = self.variants.get(str(values.get(self.variant_key)))
            if suffix and f"{template}_{suffix}.j2" in self.names:
                return f"{template}_{suffix}.j2"
        return f"{template}.j2"

    def render(self, template: str, **values: Any) -> str:
        """Render `prompts/<template>.j2` (or its variant) with `values`."""
        return self.environment.get_template(self.resolve(template, values)).render(**values).strip()

    def version(self, *templates: str) -> str:
        """A short hash of the named templates' text (all variants included)."""
        digest = hashlib.sha256()
        folder = resources.files(self.package).joinpath("prompts")
        for name in templates:
            files = {f"{name}.j2", *(f"{name}_{suffix}.j2" for suffix in self.variants.values())}
            for file in sorted(files & self.names):
                digest.update(file.encode())
                digest.update(folder.joinpath(file).read_bytes())
        return digest.hexdigest()[:16]
