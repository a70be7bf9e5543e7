"""``docs/configuration.md``, generated from the run configuration's models.

``agent-s3 config doc > docs/configuration.md`` (or ``python -m runner.config_doc``) writes
it; a test fails when the checked-in page differs from what this prints, naming that
command. Every field is one row: dotted path, type, default and the docstring its model
gives it (`runner.config_fields`).
"""

from __future__ import annotations

import re
import sys

from .config_fields import Table, tables

__all__ = ["REGENERATE", "configuration_page"]

#: The command that rewrites the page, named by the test that checks it is current.
REGENERATE = "agent-s3 config doc > docs/configuration.md"

_INTRO = f"""# Configuration

<!-- Generated from the models by `{REGENERATE}`; do not edit by hand. -->

A run is configured in layers, later ones winning: the defaults below, then `--preset NAME`
(a file of `presets/`), then each `-c FILE.yaml` or `-c dotted.key=value` in order, then the
command's own options (`--model`, `--max-steps`, ...). Mappings merge key by key; lists and
scalars replace. `agent-s3 config show [-c ...] [--preset NAME]` prints the configuration a
run would get, each field with its value, where that value came from and its one-line doc.

Values are written as YAML (`null` for none). Sections whose type is a mapping (such as
`guide.options`) are checked by the model named in their row; their keys are listed after
them, per guide, critic or entry. A model that appears at several paths (every model
setting, every decoding setting) is listed once, where it first appears, and referred to.
"""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or " "


def _table(t: Table) -> str:
    head = f"## {t.title}\n\n" + (f"{t.about}\n\n" if t.about else "")
    if not t.rows:
        return head + "No settings.\n"
    lines = ["| Key | Type | Default | Description |", "|---|---|---|---|"]
    lines += [f"| `{r.path}` | {_cell(r.type)} | {_cell(f'`{r.default}`' if r.default else '')} | {_cell(r.doc)} |"
              for r in t.rows]
    return head + "\n".join(lines) + "\n"


def _anchor(title: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def configuration_page() -> str:
    """The whole page, Markdown."""
    all_tables = tables()
    count = sum(len(t.rows) for t in all_tables)
    summary = f"{count} fields in {len(all_tables)} sections:\n\n" + "\n".join(
        f"- [{t.title}](#{_anchor(t.title)})" for t in all_tables) + "\n"
    return "\n".join([_INTRO, summary, *(_table(t) for t in all_tables)])


def main() -> None:
    sys.stdout.write(configuration_page())


if __name__ == "__main__":
    main()
