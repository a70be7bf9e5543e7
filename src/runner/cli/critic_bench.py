"""``agent-s3 critic-bench``: critics and recorded verdicts scored against labels.

``critic-bench LABELS`` scores critics (run on the labelled trajectories) and verdicts
recorded elsewhere (``--predictions``: id -> 0/1 files, AgentRewardBench's released
``results.json`` or judgment folders, read by `themis.released`) against ground-truth labels
(a JSONL file or published data read as it is, `themis.public_data`); with ``--labels-from
RUN_DIR --write LABELS.jsonl`` it first makes such labels from a run's evaluator scores.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer

from core.atomic import write_text_atomic
from core.llm import Ledger
from themis import (
    CRITICS,
    FORMATS,
    ROUNDINGS,
    BenchResult,
    LabelEntry,
    bench_critic,
    group_of,
    is_judgment_folder,
    is_results_file,
    labels_from_run,
    load_predictions,
    read_labels,
    read_released,
    render_table,
    results_json,
    score_predictions,
)

from ..config import ModelConfig
from .critic_options import (
    BaseUrl,
    Concurrency,
    OptionList,
    OptionsFile,
    critic_options,
    make_critic_for,
)
from .errors import fail
from .options import run_folder

__all__ = ["critic_bench"]


def _write_labels(path: Path, labels: list[LabelEntry]) -> None:
    lines = [entry.model_dump_json(exclude_none=True) for entry in labels]
    write_text_atomic(path, "".join(line + "\n" for line in lines))


def critic_bench(
    labels: Annotated[Path | None, typer.Argument(help="Labels: a JSONL file (id, label, platform, rollout), or "
                                                  "published data read as it is (OGRBench folder, OSReward traces, "
                                                  "AgentRewardBench annotations.csv, Online-Mind2Web human_label.json).")] = None,
    names: Annotated[list[str] | None, typer.Option("--critic", help=CRITICS.help("A critic to run (repeatable): "))] = None,
    predictions: Annotated[list[Path] | None, typer.Option("--predictions", help="Verdicts recorded elsewhere (id -> 0/1); repeatable.")] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="The critics' model as provider/model.")] = None,
    base_url: BaseUrl = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the results as JSON here.")] = None,
    labels_from: Annotated[Path | None, typer.Option("--labels-from", help="Make labels from a run's evaluator scores.")] = None,
    write: Annotated[Path | None, typer.Option("--write", help="With --labels-from: the labels file to write.")] = None,
    concurrency: Concurrency = 4,
    errors: Annotated[str, typer.Option("--errors", help="Verdicts whose critic failed: 'exclude' them from the "
                                        "metrics or 'reject' (count as 0). Always counted in the err column.")] = "exclude",
    skip_missing: Annotated[bool, typer.Option("--skip-missing", help="Leave labelled ids without a prediction out "
                                               "of the metrics (default: count them as 0).")] = False,
    by: Annotated[str, typer.Option("--by", help="Label field(s) to group by, comma-separated "
                                    "(e.g. benchmark,agent).")] = "platform",
    undefined: Annotated[str, typer.Option("--undefined", help="Undefined ratios: 'dash' (shown as —, macro "
                                           "average undefined), 'skip' (left out of macro averages) or 'zero'.")] = "dash",
    option: OptionList = None,
    options_file: OptionsFile = None,
    fmt: Annotated[str | None, typer.Option("--format", help=f"The labels' format: {', '.join(FORMATS)} "
                                             "(default: detected from the path).")] = None,
    only: Annotated[list[str] | None, typer.Option("--only", help="Keep the labels whose field has this value "
                                                   "(field=value, e.g. split=test); repeatable.")] = None,
    rounding: Annotated[str, typer.Option("--rounding", help="How figures are rounded: 'exact' (the ratio, half "
                                          "up to one decimal) or 'agentrewardbench' (its published scorer's "
                                          "steps, e.g. accuracy rounded twice).")] = "exact",
) -> None:
    """Accuracy, precision, recall, F1, NPV and TNR against labels, overall, per group and
    macro-averaged.

    Scores each --critic (run on the labelled rollouts) and each --predictions file: id -> 0/1
    verdicts, AgentRewardBench's released results.json, or a folder of its judgments."""
    rules = _rules(errors, undefined, rounding, by, skip_missing=skip_missing)
    entries = _labels(labels, labels_from, write, fmt, only)
    if not names and not predictions:
        if write is not None:
            return  # only asked to write labels
        raise fail("name a critic with --critic or a verdicts file with --predictions")
    results = _score_predictions(predictions or [], entries, rules)
    if names:
        if model is None:
            raise fail("name the critics' model with --model provider/model")
        try:
            made = {n: critic_options(n, option, options_file) for n in dict.fromkeys(names)}
            scored = _bench(made, ModelConfig(model=model, base_url=base_url), entries, concurrency, rules)
        except ValueError as e:
            raise fail(str(e)) from None
        results = [*scored, *results]
    typer.echo(render_table(results))
    if json_out is not None:
        write_text_atomic(json_out, json.dumps(results_json(results), indent=2) + "\n")
        typer.echo(f"results written to {json_out}")


def _rules(errors: str, undefined: str, rounding: str, by: str, *, skip_missing: bool) -> dict[str, Any]:
    """How verdicts are scored (``--errors``, ``--undefined``, ``--rounding``, ``--by``,
    ``--skip-missing``), each value checked: a bad one is one line."""
    if errors not in ("exclude", "reject"):
        raise fail(f"--errors {errors!r}: use exclude or reject")
    if undefined not in ("dash", "skip", "zero"):
        raise fail(f"--undefined {undefined!r}: use dash, skip or zero")
    if rounding not in ROUNDINGS:
        raise fail(f"--rounding {rounding!r}: use {' or '.join(ROUNDINGS)}")
    fields = [f.strip() for f in by.split(",") if f.strip()]
    if not fields:
        raise fail("--by needs at least one label field, e.g. --by platform")
    return {"on_error": errors, "skip_missing": skip_missing, "by": fields, "undefined": undefined,
            "rounding": rounding}


def _score_predictions(predictions: list[Path], entries: list[LabelEntry], rules: dict[str, Any]) -> list[BenchResult]:
    """Each ``--predictions`` source scored against the labels; an unreadable one is one line."""
    results: list[BenchResult] = []
    try:
        sources = _prediction_sources(predictions, entries)
        for name, verdicts, failed in sources:
            results.append(score_predictions(name, entries, verdicts, errors=failed, **rules))  # type: ignore[arg-type]
    except (OSError, ValueError) as e:
        raise fail(str(e)) from None
    return results


def _prediction_sources(paths: list[Path], entries: list[LabelEntry]
                        ) -> list[tuple[str, dict[str, int | None], dict[str, str]]]:
    """(name, verdicts, errors) of each --predictions: a verdicts file, or each judge of an
    AgentRewardBench results.json or judgment folder; a name given twice gets its folder's."""
    found: list[tuple[Path, str, dict[str, int | None], dict[str, str]]] = []
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"predictions file {path} does not exist")
        if is_results_file(path) or is_judgment_folder(path):
            judges = read_released(path, entries)
            for released in judges:
                for note in released.notes:
                    typer.echo(f"{path}: {note}")
                if released.predictions:
                    found.append((path, released.name, released.predictions, released.errors))
            empty = [j.name for j in judges if not j.predictions]
            if empty:
                typer.echo(f"{path}: left out {len(empty)} judges without a verdict (every vector empty): "
                           f"{', '.join(empty)}")
            continue
        found.append((path, path.stem, load_predictions(path), {}))
    names = [name for _, name, _, _ in found]
    out = []
    for path, name, verdicts, failed in found:
        where = path if path.is_dir() else path.parent
        out.append((f"{where.name}/{name}" if names.count(name) > 1 else name, verdicts, failed))
    return out


def _labels(labels: Path | None, labels_from: Path | None, write: Path | None, fmt: str | None = None,
            only: list[str] | None = None) -> list[LabelEntry]:
    """The labelled set: read from a file, or made from a run (and written, with --write)."""
    if labels_from is not None:
        if labels is not None:
            raise fail("give either a labels file or --labels-from RUN_DIR, not both")
        entries = labels_from_run(run_folder(labels_from))
        if not entries:
            raise fail(f"no rollout of {labels_from} has an evaluator score to make a label from")
        if write is not None:
            _write_labels(write, entries)
            typer.echo(f"{len(entries)} labels ({sum(e.label for e in entries)} successes) written to {write}")
        return entries
    if write is not None:
        raise fail("--write goes with --labels-from RUN_DIR")
    if labels is None:
        raise fail("give a labels file (LABELS.jsonl) or --labels-from RUN_DIR --write LABELS.jsonl")
    try:
        found = read_labels(labels, fmt)
    except (OSError, ValueError) as e:
        raise fail(str(e)) from None
    entries = found.entries
    for condition in only or []:
        key, sep, value = condition.partition("=")
        if not sep or not key:
            raise fail(f"--only {condition!r}: write field=value, e.g. --only split=test")
        entries = [e for e in entries if str(group_of(e, [key])) == value]
    skipped = ", ".join(f"{n} {why}" for why, n in found.skipped.items())
    if found.format != "jsonl" or skipped or only:
        typer.echo(f"{len(found.entries)} labelled trajectories read as {found.format}"
                   + (f" (left out: {skipped})" if skipped else "")
                   + (f"; --only {' '.join(only)} keeps {len(entries)}" if only else ""))
    for note in found.notes:
        typer.echo(f"{labels}: {note}")
    if not entries:
        raise fail(f"{labels} holds no labelled trajectory" + (" matching --only" if only else ""))
    return entries


def _bench(names: dict[str, dict[str, Any]], cfg: ModelConfig, entries: list[LabelEntry], concurrency: int,
           rules: dict[str, Any]) -> list[BenchResult]:
    ledger = Ledger()  # labelled trajectories may come from many runs: no one run's ledger
    made = [(*make_critic_for(name, cfg, ledger, options), _label(name, options)) for name, options in names.items()]

    async def go() -> list[BenchResult]:
        try:
            return [await bench_critic(c, entries, concurrency=concurrency, name=label, **rules)
                    for c, _, label in made]
        finally:
            for _, owned, _ in made:
                for m in owned:
                    await m.aclose()

    return asyncio.run(go())


def _label(name: str, options: dict[str, Any]) -> str:
    """The critic's row name: its name, with the options that differ from the defaults."""
    if not options:
        return name
    flat: list[str] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat.append(f"{prefix}={value}")

    walk("", options)
    return f"{name}[{','.join(flat)}]"


