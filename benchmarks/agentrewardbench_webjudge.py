"""WebJudge's published AgentRewardBench table, reproduced from the released files by the
command line alone, and compared figure by figure.

For each released WebJudge variant (a folder holding ``results.json`` and
``metrics_test.csv``, as OSU-NLP-Group/Online-Mind2Web publishes them under
``data/evaluation_results/agent_reward_bench_evaluation_results/<variant>/results/``) this
runs, as a user would::

    agent-s3 critic-bench annotations.csv --predictions <variant>/results.json \\
        --only split=test --by benchmark,agent --json OUT [--rounding agentrewardbench]

and compares every figure of the published table (judge WebJudge, category Success: each
benchmark and agent, each benchmark's "All", "Overall") with the figure the table printed,
metric by metric. Default settings first, then the published scorer's rounding. A group
with no trajectory (Llama 3.3 never ran VisualWebArena) is printed empty by agent-s3 and
as zeros by the scorer: counted apart, not as figures. An undefined ratio (precision with
nothing accepted) is "—" by default and 0 in the scorer: counted apart under the default
rule, compared under ``--undefined zero``. Where the variant's folder also holds WebJudge's
raw judgments (``<benchmark>/<agent>/webjudge/<task id>.json``; the public copies hold a
part of them), the same command reads that folder as ``--predictions`` and its verdicts are
compared with results.json's, trajectory by trajectory.

``annotations.csv`` and ``splits.csv`` are AgentRewardBench's (``agent_reward_bench/data/``
of ``pip download agent-reward-bench==0.1.2 --no-deps``, or McGill-NLP/agent-reward-bench).

    python benchmarks/agentrewardbench_webjudge.py --annotations DIR --released DIR [--variant NAME ...]

``--released`` is the folder of variants (``webjudge_o4_mini``, ``webjudge_gpt4o``,
``webjudge_7B``; each either holding the two files or a ``results/`` folder that does).
Prints ``name: value`` lines and the figures that differ.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

METRICS = ("accuracy", "precision", "recall", "f1", "npv", "tnr")
#: The scorer's display names (agent_reward_bench.judge.utils.get_renames) -> agent-s3's groups.
AGENTS = {"Claude 3.7 Sonnet": "GenericAgent-anthropic_claude-3.7-sonnet", "GPT-4o": "GenericAgent-gpt-4o-2024-11-20",
          "Llama 3.3": "GenericAgent-meta-llama_Llama-3.3-70B-Instruct",
          "Qwen2.5-VL": "GenericAgent-Qwen_Qwen2.5-VL-72B-Instruct", "All": "*"}
BENCHMARKS = {"AssistantBench": "assistantbench", "WebArena": "webarena", "VisualWebArena": "visualwebarena",
              "WorkArena": "workarena", "WorkArena++": "workarena++", "Overall": "*"}
AGENT_S3 = Path(sys.executable).with_name("agent-s3")


def _files(folder: Path) -> tuple[Path, Path] | None:
    for where in (folder, folder / "results"):
        if (where / "results.json").is_file() and (where / "metrics_test.csv").is_file():
            return where / "results.json", where / "metrics_test.csv"
    return None


def _published(path: Path) -> dict[str, dict[str, float]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["judge"] == "WebJudge" and r["category"] == "Success"]
    out = {}
    for r in rows:
        group = f"{BENCHMARKS[r['benchmark']]}/{AGENTS[r['agent']]}"
        out["overall" if group == "*/*" else group] = {m: float(r[m]) for m in METRICS}
    return out


def _run(annotations: Path, results: Path, extra: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench.json"
        argv = [str(AGENT_S3), "critic-bench", str(annotations), "--predictions", str(results), "--only",
                "split=test", "--by", "benchmark,agent", "--json", str(out), *extra]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise SystemExit(f"agent-s3 critic-bench failed ({done.returncode}): {done.stderr.strip()}")
        data = json.loads(out.read_text())
    if list(data) != ["webjudge"]:
        raise SystemExit(f"{results}: expected the verdicts of one judge, webjudge; got {', '.join(data)}")
    return dict(data["webjudge"])


def _compare(published: dict[str, dict[str, float]], result: dict[str, Any]) -> dict[str, Any]:
    counts = {m: [0, 0] for m in METRICS}
    undefined = 0
    empty = []
    differ = []
    for group, row in published.items():
        scores = result["scores"].get(group)
        if scores is None:
            raise SystemExit(f"agent-s3 printed no group {group}")
        if scores["n"] == 0:
            empty.append(group)
            continue
        for metric in METRICS:
            ours = result["figures"][group][metric]
            if ours is None and row[metric] == 0.0:
                undefined += 1
                continue
            counts[metric][1] += 1
            if ours == row[metric]:
                counts[metric][0] += 1
            else:
                differ.append(f"{group} {metric}: {ours} printed, {row[metric]} published")
    return {"counts": counts, "undefined": undefined, "empty": empty, "differ": differ}


def _raw_agreement(annotations: Path, variant: Path, released: dict[str, Any]) -> str | None:
    if next(variant.glob("*/*/webjudge/*.json"), None) is None:
        return None
    raw = _run(annotations, variant, [])
    shared = [i for i in raw["predictions"] if i in released["predictions"]]
    same = sum(raw["predictions"][i] == released["predictions"][i] for i in shared)
    unreadable = [i for i in raw["errors"] if i in released["predictions"]]
    return (f"{same}/{len(shared)} verdicts equal; {len(unreadable)} replies without a status: "
            f"({sum(released['predictions'][i] == 0 for i in unreadable)} of them 0 in results.json, WebJudge's rule); "
            f"{len(raw['unmatched'])} judgments of no labelled test trajectory")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--annotations", type=Path, required=True, help="folder with annotations.csv and splits.csv")
    parser.add_argument("--released", type=Path, required=True, help="folder of WebJudge's released variants")
    parser.add_argument("--variant", action="append", help="only these variants (default: every one found)")
    args = parser.parse_args()
    annotations = args.annotations / "annotations.csv"
    if not annotations.is_file() or not (args.annotations / "splits.csv").is_file():
        raise SystemExit(f"{args.annotations} needs annotations.csv and splits.csv (AgentRewardBench's data folder)")
    variants = sorted(p for p in args.released.iterdir() if p.is_dir() and _files(p)) if args.released.is_dir() else []
    if args.variant:
        variants = [v for v in variants if v.name in args.variant]
    if not variants:
        raise SystemExit(f"{args.released}: no folder with results.json and metrics_test.csv")
    settings = {"default": [], "agentrewardbench_rounding": ["--rounding", "agentrewardbench", "--undefined", "zero"]}
    for setting, extra in settings.items():
        total = {m: [0, 0] for m in METRICS}
        for variant in variants:
            results, metrics = _files(variant)  # type: ignore[misc]
            ran = _run(annotations, results, extra)
            found = _compare(_published(metrics), ran)
            if setting == "default" and (agreement := _raw_agreement(annotations, variant, ran)) is not None:
                print(f"raw_judgments.{variant.name}: {agreement}")
            for metric, (same, n) in found["counts"].items():
                total[metric][0] += same
                total[metric][1] += n
                print(f"{setting}.{variant.name}.{metric}_match: {same}/{n}")
            print(f"{setting}.{variant.name}.undefined_printed_as_dash_published_0: {found['undefined']}")
            print(f"{setting}.{variant.name}.empty_groups: {len(found['empty'])} ({', '.join(found['empty'])})")
            for line in found["differ"]:
                print(f"{setting}.{variant.name}.differs: {line}")
        same = sum(v[0] for v in total.values())
        n = sum(v[1] for v in total.values())
        for metric, (s, t) in total.items():
            print(f"{setting}.all_variants.{metric}_match: {s}/{t}")
        print(f"{setting}.all_variants.figures_match: {same}/{n}")


if __name__ == "__main__":
    main()
