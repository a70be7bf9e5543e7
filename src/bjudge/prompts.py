"""The judge's prompt templates (Jinja2 files in `prompts/`) and their version: a hash of the
template text, so a changed prompt never reuses facts that an older prompt wrote."""

from __future__ import annotations

from core.prompts import PromptTemplates

__all__ = ["prompt_version", "render"]

TEMPLATES = PromptTemplates("bjudge")
render = TEMPLATES.render
prompt_version = TEMPLATES.version
