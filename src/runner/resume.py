"""Resuming a benchmark run: what it was asked to do, what is finished, what to redo.

A benchmark run's root holds ``bench.json`` (`BenchManifest`): the command's identity (the
settings that change results), each task's domain and the tasks skipped as unsupported.
Re-running a command whose ``--out``/``--run-id`` names an existing run resumes it; an
identity that differs is one `ResumeMismatch` naming the settings that changed. How a
model is reached (base URL, key, timeout, connections) is not part of the identity.

The unit of resumption is the rollout (`runner.kept` says which are kept); each strategy
answers with its resuming variant (`BaseStrategy.resuming`): `ResumingWide` is wide
scaling that keeps finished rollouts and tells their narratives again from the fact cache
(no model call) before the judge.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, Field

from core.atomic import write_json_atomic
from core.trajectory import RunLayout, load_record

from .kept import pending_rollouts, single_result, task_finished
from .run_log import RUN_LOG
from .strategy import RolloutOutcome
from .wide import ResumingWide

__all__ = [
    "MANIFEST_FILE",
    "BenchManifest",
    "ResumeMismatch",
    "ResumingWide",
    "check_resume",
    "identity_of",
    "outcome_from_header",
    "pending_rollouts",
    "read_manifest",
    "single_result",
    "task_finished",
    "write_manifest",
]

MANIFEST_FILE = "bench.json"
#: Keys that say how a model is reached rather than what it is, or how many desktops run at
#: once; they may change on resume.
_REACH = frozenset({"base_url", "api_key", "token", "timeout", "max_connections", "desktop_memory_mib",
                    "desktops_per_core", "spare"})


class ResumeMismatch(ValueError):
    """The resumed command differs from the run's; the message names what changed."""


class BenchManifest(BaseModel):
    """``bench.json``: what a benchmark run was asked to do."""

    schema_version: int = 1
    suite: str
    identity: dict[str, Any]
    domains: dict[str, str] = Field(default_factory=dict)
    """Domain of each task run, by task id (task lists are grouped by domain)."""
    skipped: dict[str, list[str]] = Field(default_factory=dict)
    """Tasks left out because this runner cannot set them up or evaluate them: their gaps."""
    seed: int
    """Base seed of the rollouts (drawn once, kept on resume so slots keep their models)."""
    created_at: float = Field(default_factory=time.time)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in sorted(value.items()) if k not in _REACH}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def identity_of(config: dict[str, Any], **command: Any) -> dict[str, Any]:
    """The settings that decide a run's results: the command's own options and the run
    configuration without paths, labels, the worker (filled from the environment) and
    the ways models are reached."""
    shown = {k: v for k, v in config.items() if k not in ("run_id", "out_dir", "label", "worker")}
    return _strip({"command": command, "config": shown})


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += _diff(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return out
    return [] if old == new else [f"{path} (was {old!r}, now {new!r})"]


def read_manifest(layout: RunLayout) -> BenchManifest | None:
    path = layout.path / MANIFEST_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return load_record(path, BenchManifest, data)


def write_manifest(layout: RunLayout, manifest: BenchManifest) -> None:
    layout.create()
    write_json_atomic(layout.path / MANIFEST_FILE, manifest, durable=layout.durable)


def check_resume(layout: RunLayout, suite: str, identity: dict[str, Any]) -> BenchManifest | None:
    """The existing run's manifest when `layout` is resumable by this command (None: a new
    run). Raises `ResumeMismatch` when the run exists but was made by another command."""
    manifest = read_manifest(layout)
    if manifest is None:
        if layout.path.is_dir() and any(p.name != RUN_LOG for p in layout.path.iterdir()):  # a log alone is no run
            raise ResumeMismatch(f"{layout.path} exists but is not a benchmark run: pass another --run-id")
        return None
    changes = ([f"suite (was {manifest.suite!r}, now {suite!r})"] if manifest.suite != suite else [])
    changes += _diff(manifest.identity, identity)
    if changes:
        shown = "; ".join(changes[:4]) + (f"; and {len(changes) - 4} more" if len(changes) > 4 else "")
        raise ResumeMismatch(f"run {layout.run_id} was made with other settings: {shown}. "
                             "Re-run with the original settings, or pass another --run-id")
    return manifest


#: A finished rollout's outcome as its header recorded it.
outcome_from_header = RolloutOutcome.from_header
