"""OSWorld's ``.env``, read as desktop-env reads it, without touching the process environment.

desktop-env's AWS provider calls ``dotenv.load_dotenv()`` at import: the first ``.env`` found
upward from its own folder (in an OSWorld checkout, the checkout's root) fills every
variable not already set. Here the same file format is read with python-dotenv, from
``env_file`` or the first ``.env`` upward from the current folder (where OSWorld's users run
it), and its values fill only what the process environment lacks. They go to the fleet's
settings (`osworld_environ`) and its boto3 session (`credentials`), never into
``os.environ``, so nothing else in the process sees them; values are never logged, only
which file and which variables were used.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values, find_dotenv

__all__ = ["CREDENTIAL_VARS", "credentials", "env_file_values", "osworld_environ"]

_log = logging.getLogger("aws.dotenv")
#: Variables boto3 reads for credentials, and the session argument each becomes.
CREDENTIAL_VARS = {"AWS_ACCESS_KEY_ID": "aws_access_key_id", "AWS_SECRET_ACCESS_KEY": "aws_secret_access_key",
                   "AWS_SESSION_TOKEN": "aws_session_token", "AWS_PROFILE": "profile_name"}
_told: set[str] = set()


def _path(env_file: str | None) -> Path | None:
    if env_file:
        path = Path(env_file).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"env_file {env_file} does not exist: give OSWorld's .env or leave env_file unset")
        return path
    found = find_dotenv(usecwd=True)
    return Path(found) if found else None


def env_file_values(env_file: str | None = None) -> tuple[Path | None, dict[str, str]]:
    """(the file read, its variables); (None, {}) when there is none."""
    path = _path(env_file)
    if path is None:
        return None, {}
    values = {k: v for k, v in dotenv_values(path).items() if v is not None}
    key = str(path.resolve())
    if key not in _told:
        _told.add(key)
        _log.info("read %s (%s)", path, ", ".join(sorted(values)) or "no variables")
    return path, values


def osworld_environ(env_file: str | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The process environment over the ``.env`` file's values (which never override)."""
    _, values = env_file_values(env_file)
    return {**values, **(os.environ if environ is None else environ)}


def credentials(env_file: str | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """boto3 session arguments from the ``.env`` file, for credentials the process lacks.

    Empty when the process environment names any credential itself (boto3 then finds its own)."""
    environ = os.environ if environ is None else environ
    if any(environ.get(var) for var in CREDENTIAL_VARS):
        return {}
    _, values = env_file_values(env_file)
    return {arg: values[var] for var, arg in CREDENTIAL_VARS.items() if values.get(var)}
