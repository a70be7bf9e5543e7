"""The command line's environment options, derived from the registered kinds.

``--env`` offers every registered kind (read when the command runs, so a kind registered
after the command line was built is offered too) and its help names each with its
description; the options that set one kind's settings (``--url``, ``--image``, ...) take
their help from that setting's own docstring (`environments.kinds.field_help`), and a
setting the chosen kind does not have is refused by the configuration's validation.
"""

from __future__ import annotations

from typing import Any

import typer

from core.registry import PATH_FORM, is_path
from environments.kinds import describe_kinds, get_kind, kind_names

__all__ = ["ENV_HELP", "env_option", "environment_overrides", "parse_kind"]

ENV_HELP = f"Where the rollouts run: {describe_kinds()}, or {PATH_FORM} (an EnvironmentKind) of your own."


def parse_kind(value: str) -> str:
    """``--env``'s value: a kind registered when the command runs, or a dotted path
    ``package.module:KIND`` to one of your own."""
    if is_path(value):
        try:
            get_kind(value)
        except KeyError as e:
            raise typer.BadParameter(str(e.args[0])) from None
        return value
    known = kind_names()
    if value not in known:
        raise typer.BadParameter(f"{value!r} is not an environment kind: use one of {', '.join(known)}, "
                                 f"or a dotted path {PATH_FORM} of your own")
    return value


def env_option(help: str = ENV_HELP) -> Any:
    """The ``--env`` option (a registered kind's name, or a dotted path to a kind)."""
    return typer.Option("--env", help=help, parser=parse_kind, metavar="KIND")


def environment_overrides(**given: Any) -> dict[str, Any]:
    """``environment__<setting>`` overrides for the options that were given (None: not given)."""
    return {f"environment__{name}": value for name, value in given.items() if value is not None}
