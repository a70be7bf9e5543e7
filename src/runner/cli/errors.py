"""One line, exit code 2, for every error a user can cause or fix; tracebacks only for bugs.

Each command already turns the errors it expects into ``error: ...`` lines; this is the net
under all of them, at the console script itself, so a damaged run folder, a full disk, a
bad file or a model without a key never print a Python traceback whichever command meets
them. Set ``AGENT_S3_DEBUG=1`` to see the traceback anyway.
"""

from __future__ import annotations

import errno
import os
import sys
from typing import Any

import typer

from core.config import redact_urls
from core.llm import MissingAPIKeyError, ModelError
from core.protocols import EnvError

from ..terminal import CleanStream, strip_controls

__all__ = ["USER_ERRORS", "GuardedTyper", "describe_error", "fail"]

#: Errors that come from what the user gave or from the machine, never from a bug alone:
#: wrong values and files (ValueError covers ConfigError, RunFolderError, MixtureError and
#: pydantic's ValidationError), the environment, the models (a missing key, a provider that
#: keeps failing, a scripted model with no script), and the file system.
USER_ERRORS: tuple[type[BaseException], ...] = (ValueError, KeyError, EnvError, ModelError, OSError)

_HINTS = {
    errno.ENOSPC: "free some space, then run the same command again (with --resume for `run`)",
    errno.EDQUOT: "the disk quota is used up: free some space, then run the same command again",
    errno.EACCES: "check the file's owner and permissions",
    errno.EROFS: "the file system is read-only: pass --out on a writable one",
    # A folder option aimed at a file or a device (say --out /dev/null): refused, never replaced.
    errno.ENOTDIR: "a part of the path is not a folder (a file or a device): give a folder",
    errno.EEXIST: "something is there already; if it is not a folder, give a folder",
}


def describe_error(exc: BaseException) -> str:
    """The one line shown for a user error: what happened, on which file, what to do."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({exc.filename})" if exc.filename else ""
        hint = _HINTS.get(exc.errno or 0)
        return f"{exc.strerror}{where}" + (f": {hint}" if hint else "")
    if isinstance(exc, KeyError) and exc.args:  # str() of a KeyError quotes its message
        text = str(exc.args[0]).strip() or type(exc).__name__
    else:
        text = str(exc).strip().strip('"') or type(exc).__name__
    first = text.splitlines()[0]
    if isinstance(exc, KeyError | MissingAPIKeyError) or type(exc) in (ValueError, OSError, EnvError):
        return first
    return first if _speaks_for_itself(exc) else f"{type(exc).__name__}: {first}"


def _speaks_for_itself(exc: BaseException) -> bool:
    """Errors of this project whose messages are written for the user."""
    return type(exc).__module__.split(".")[0] in ("core", "runner", "environments", "aws", "bjudge", "themis",
                                                  "gprm", "agent_s3")


class GuardedTyper(typer.Typer):
    """A Typer app whose console script turns `USER_ERRORS` into one ``error:`` line."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # Only the runner's own terminal codes get through, whatever a model or task wrote.
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = CleanStream(sys.stdout), CleanStream(sys.stderr)
        try:
            return super().__call__(*args, **kwargs)
        except USER_ERRORS as exc:
            if os.environ.get("AGENT_S3_DEBUG"):
                raise
            typer.echo(f"error: {strip_controls(redact_urls(describe_error(exc)))}", err=True)
            sys.exit(2)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            sys.exit(130)
        finally:
            sys.stdout, sys.stderr = streams


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print `message` as a command's one error line (credentials in URLs redacted); raise
    what this returns."""
    typer.echo(f"error: {redact_urls(message)}", err=True)
    return typer.Exit(code=code)
