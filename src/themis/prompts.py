"""The critics' prompt templates (Jinja2 files in `prompts/`)."""

from __future__ import annotations

from core.prompts import PromptTemplates

__all__ = ["render"]

TEMPLATES = PromptTemplates("themis")
render = TEMPLATES.render
