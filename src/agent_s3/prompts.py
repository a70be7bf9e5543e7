"""The worker's prompt templates (Jinja2 files in `prompts/`); on a phone a template's
`_mobile` variant is used when it exists."""

from __future__ import annotations

from core.prompts import PromptTemplates

__all__ = ["render"]

TEMPLATES = PromptTemplates("agent_s3", variant_key="platform_name", variants={"Android": "mobile"})
render = TEMPLATES.render
