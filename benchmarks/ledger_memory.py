"""The model-call ledger at a benchmark's size: memory per record, appending, loading and the
readers' accesses, for this checkout's `Ledger` beside the one that kept every `CallRecord` in
a list (its source read from git, ``--reference``), in the same invocation on the same file.

The records are shaped like a SIMULATED OSWorld run's (`benchmarks/sim_scale.py`): 361 tasks x
10 rollouts; policy, reflection and grounding calls tagged run/task/rollout/call_id, narrator
calls tagged run/task/bjudge_call, a few critic calls. Every reader's answer from the two
ledgers is compared, so the figures are of ledgers that answer the same.

    python benchmarks/ledger_memory.py --records 400000
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from core.llm import CallRecord, Ledger

ROOT = Path(__file__).resolve().parents[1]
#: The last commit whose ledger kept its records as a list of objects.
REFERENCE = "07e04d8"
MODEL = "sim/openai/gpt-5-2025-08-07"
#: Share of each module in a simulated run's ledger (its counts, rounded).
MIX = (("policy", 29), ("reflection", 28), ("narrative", 28), ("grounding", 15))


def reference_ledger(ref: str, folder: Path) -> type[Any]:
    """The `Ledger` class of `ref`, imported beside this checkout's (same package, own module):
    its file is written out of git into `folder` and imported from there like any module."""
    source = subprocess.check_output(["git", "show", f"{ref}:src/core/llm/ledger.py"], cwd=ROOT, text=True)
    path = folder / "_reference_ledger.py"
    path.write_text(source)
    name = "core.llm._reference_ledger"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module.Ledger  # type: ignore[no-any-return]


def records(count: int, seed: int = 7) -> Iterator[CallRecord]:
    """`count` fresh records of a simulated run, one at a time (held by no one but the ledger)."""
    rng = random.Random(seed)
    tasks = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(361)]
    modules = [m for m, share in MIX for _ in range(share)]
    clock = 1_795_747_232.0
    for n in range(count):
        task = tasks[rng.randrange(len(tasks))]
        module = "critic" if n % 97 == 0 else modules[rng.randrange(len(modules))]
        tags = {"run": "paced", "task": task}
        if module == "narrative":
            tags["bjudge_call"] = uuid.UUID(int=rng.getrandbits(128)).hex
        else:
            tags |= {"rollout": str(rng.randrange(10)), "call_id": uuid.UUID(int=rng.getrandbits(128)).hex}
        clock += rng.random() * 0.5
        tokens = rng.randrange(1_000, 14_000)
        yield CallRecord(id=uuid.UUID(int=rng.getrandbits(128)).hex, module=module, model=MODEL, tags=tags,
                         started_at=clock, seconds=rng.uniform(0.5, 9.0), input_tokens=tokens,
                         output_tokens=rng.randrange(50, 1_500), cached_tokens=rng.randrange(0, tokens // 2),
                         dollars=tokens * 1.25e-6 + rng.random() * 0.01, paced_seconds=rng.random() * 2)


def timed(action: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """Mean seconds of `action` over `repeat` runs, and its last answer."""
    answer = None
    started = time.perf_counter()
    for _ in range(repeat):
        answer = action()
    return (time.perf_counter() - started) / repeat, answer


def held_bytes(build: Callable[[], Any]) -> tuple[int, Any]:
    """Bytes still allocated once `build` has returned (what the built object holds)."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    built = build()
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, built


def readers(ledger: Any, old: bool, task: str, last_tag: str) -> dict[str, Callable[[], Any]]:
    """The accesses the runner makes, as each ledger's callers make them."""
    view = ledger.records

    def last() -> Any:
        if old:
            return next((r for r in reversed(view) if r.tags.get("bjudge_call") == last_tag), None)
        return ledger.last(bjudge_call=last_tag)

    def critic() -> Any:
        if old:
            return [r for r in view if r.module == "critic" and r.tags.get("run") == "paced" and r.tags.get("task") == task]
        return ledger.calls("critic", run="paced", task=task)

    return {
        "a narrator's own record (bjudge, newest first)": last,
        "the last 200 records (records[n - 200:])": lambda: list(view[len(view) - 200:]),
        "one record from the middle (records[n // 2])": lambda: view[len(view) // 2],
        "a task's critic calls (retry, once per task)": critic,
        "dollars of one task": lambda: ledger.dollars(run="paced", task=task),
        "totals per module": lambda: {m: t.model_dump() for m, t in ledger.totals().items()},
        "total": lambda: ledger.total().model_dump(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--reference", default=REFERENCE, help="git revision of the list-of-records ledger")
    args = parser.parse_args(argv)
    n = args.records
    print(f"SIMULATED records: {n:,} shaped like a 361 x 10 run's; reference = Ledger of {args.reference}", flush=True)
    gen_seconds, _ = timed(lambda: sum(1 for _ in records(n)))
    rows: list[tuple[str, float, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="ledger-memory-") as folder:
        old_ledger = reference_ledger(args.reference, Path(folder))
        figures: dict[str, dict[str, Any]] = {}
        kinds: tuple[tuple[str, Callable[[Path], Any]], ...] = (("old", old_ledger), ("new", Ledger))
        for label, cls in kinds:
            path = Path(folder) / f"{label}.jsonl"
            append_seconds = _append(cls(path), n)
            gc.collect()
            load_seconds, _ = timed(functools.partial(cls, path))
            held, ledger = held_bytes(functools.partial(cls, path))
            figures[label] = {"append": append_seconds - gen_seconds, "load": load_seconds, "bytes": held,
                              "ledger": ledger, "size": path.stat().st_size}
            print(f"{label}: appended, loaded and measured", flush=True)
        old, new = figures["old"]["ledger"], figures["new"]["ledger"]
        if Path(folder, "old.jsonl").read_bytes() != Path(folder, "new.jsonl").read_bytes():
            raise SystemExit("the two ledgers wrote different files")
        tail = old.records[len(old.records) - 3_000:]
        task = next(r.tags["task"] for r in reversed(tail) if r.module == "critic")
        # a narrator looks for its call's record as the call returns: behind the calls still in
        # flight, at most 234 in the simulated runs
        last_tag = next(r.tags["bjudge_call"] for r in reversed(tail[:-200]) if r.module == "narrative")
        rows.append(("bytes held per record", figures["old"]["bytes"] / n, figures["new"]["bytes"] / n, "B"))
        rows.append((f"append {n:,} (file written)", figures["old"]["append"], figures["new"]["append"], "s"))
        rows.append((f"load an existing file of {n:,}", figures["old"]["load"], figures["new"]["load"], "s"))
        old_readers, new_readers = readers(old, True, task, last_tag), readers(new, False, task, last_tag)
        for name, old_read in old_readers.items():
            repeat = 3 if "critic" in name or "narrator" in name or "totals" in name or name == "total" else 200
            old_s, old_answer = timed(old_read, repeat)
            new_s, new_answer = timed(new_readers[name], repeat)
            if _comparable(old_answer) != _comparable(new_answer):
                raise SystemExit(f"the ledgers answer '{name}' differently")
            rows.append((name, old_s, new_s, "s"))
        if list(old.records) != list(new.records):
            raise SystemExit("the ledgers hold different records")
    print(f"(ledger file: {figures['new']['size'] / 2**20:.0f} MiB; record generation, "
          f"subtracted from appending: {gen_seconds:.1f} s)")
    print(f"{'':48} {'old (list)':>14} {'new':>14} {'old / new':>10}")
    for name, old_v, new_v, unit in rows:
        print(f"{name:48} {_fmt(old_v, unit):>14} {_fmt(new_v, unit):>14} {old_v / new_v if new_v else float('inf'):>9.1f}x")
    return 0


def _append(ledger: Any, n: int) -> float:
    """Seconds to append `n` fresh records (their making included: subtracted by the caller)."""
    started = time.perf_counter()
    for record in records(n):
        ledger.append(record)
    return time.perf_counter() - started


def _comparable(answer: Any) -> Any:
    if isinstance(answer, CallRecord):
        return answer.model_dump()
    if isinstance(answer, list):
        return [_comparable(a) for a in answer]
    return answer


def _fmt(value: float, unit: str) -> str:
    if unit == "B":
        return f"{value:,.0f} B"
    return f"{value:.3f} s" if value >= 0.01 else f"{value * 1e6:,.1f} us"


if __name__ == "__main__":
    raise SystemExit(main())
