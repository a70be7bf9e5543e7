"""The ledger keeps records as lines and decodes them on access: every reader's answer must be
the one a list of the appended records gives (`benchmarks/ledger_memory.py` measures the cost)."""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from pathlib import Path

import pytest

from core.llm import CallRecord, Ledger
from core.llm import ledger as ledger_module
from core.llm.ledger import ModuleTotals

MODULES = ("policy", "reflection", "grounding", "narrative", "critic")


def _records(count: int, seed: int = 3) -> list[CallRecord]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        module = MODULES[rng.randrange(len(MODULES))]
        tags = {"run": f"r{rng.randrange(2)}", "task": f"t{rng.randrange(4)}"}
        if module == "narrative":
            tags["bjudge_call"] = f"c{n}"
        else:
            tags |= {"rollout": str(rng.randrange(3)), "call_id": f"call-{n}"}
        if n % 17 == 0:
            tags["note"] = "é ünïcode \"quoted\" \\ back\nslash"
        failed = n % 11 == 0
        out.append(CallRecord(id=f"id-{n}", module=module, model="sim/openai/gpt-5", tags=tags,
                              started_at=1_795_747_232.0 + n * 0.1 + 1e-7, seconds=rng.random() * 9,
                              input_tokens=rng.randrange(10**6), output_tokens=rng.randrange(10**4),
                              cached_tokens=rng.randrange(100), dollars=0.1 + 0.2 * rng.random(),
                              retries=rng.randrange(3), error="HTTP 500\nline two" if failed else None,
                              error_kind="server" if failed else None, paced_seconds=rng.random()))
    return out


@pytest.fixture(autouse=True)
def small_tail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep only a few newest records as objects, so most reads decode lines."""
    monkeypatch.setattr(ledger_module, "TAIL", 4)


@pytest.fixture(params=["file", "memory"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Path | None:
    return tmp_path / "ledger.jsonl" if request.param == "file" else None


def _filled(where: Path | None, records: list[CallRecord]) -> Ledger:
    ledger = Ledger(where)
    for record in records:
        ledger.append(record)
    return ledger


def test_every_record_reads_back_exactly_by_index_slice_iteration_and_reversed(where: Path | None) -> None:
    records = _records(120)
    ledger = _filled(where, records)
    view = ledger.records
    assert len(view) == len(ledger) == 120
    assert [view[i] for i in range(120)] == records
    assert view[-1] == records[-1] and view[-120] == records[0]
    assert list(view) == records
    assert list(reversed(view)) == records[::-1]
    for start in (0, 1, 57, 115, 119, 120, 500):
        assert list(view[start:]) == records[start:]
    assert list(view[10:90:7]) == records[10:90:7] and list(view[::-3]) == records[::-3]
    with pytest.raises(IndexError):
        view[120]
    with pytest.raises(IndexError):
        view[-121]
    assert records[33] in view and view.index(records[33]) == 33


def test_a_continued_file_reads_back_what_was_appended_before_and_after(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    records = _records(90)
    _filled(path, records[:50])
    again = _filled(path, records[50:])
    assert list(again.records) == records
    assert list(Ledger(path).records) == records == Ledger.read(path)


def test_totals_and_total_equal_a_recount(where: Path | None, tmp_path: Path) -> None:
    records = _records(200)
    ledger = _filled(where, records)
    recount: dict[str, ModuleTotals] = {}
    whole = ModuleTotals()
    for record in records:
        recount.setdefault(record.module, ModuleTotals()).add(record)
        whole.add(record)
    assert ledger.totals() == recount and list(ledger.totals()) == list(recount)
    assert ledger.total() == whole
    ledger.totals()["policy"].calls += 1000  # a copy: the ledger's own sums are untouched
    assert ledger.totals() == recount
    if where is not None:
        assert Ledger(where).totals() == recount and Ledger(where).total() == whole


def test_dollars_by_any_tags_equal_a_scan(where: Path | None) -> None:
    records = _records(150)
    ledger = _filled(where, records)
    values = {key: {None, *(r.tags.get(key) for r in records)} for key in ("run", "task", "rollout", "note")}
    for run, task, rollout, note in itertools.product(*values.values()):
        tags = {k: v for k, v in zip(values, (run, task, rollout, note), strict=True) if v is not None}
        expected = sum(r.dollars for r in records if all(r.tags.get(k) == v for k, v in tags.items()))
        assert ledger.dollars(**tags) == pytest.approx(expected, abs=1e-12)
    assert ledger.dollars(call_id="call-7") == sum(r.dollars for r in records if r.tags.get("call_id") == "call-7")
    assert ledger.dollars(run="nobody") == 0.0


def test_calls_of_a_module_for_a_run_and_task_equal_a_scan(where: Path | None) -> None:
    records = _records(300)
    ledger = _filled(where, records)
    for module, run, task in itertools.product(MODULES, ("r0", "r1", "r9"), ("t0", "t3", "t9")):
        expected = [r for r in records if r.module == module and r.tags.get("run") == run and r.tags.get("task") == task]
        assert ledger.calls(module, run=run, task=task) == expected
    assert ledger.calls("critic", run="r1") == [r for r in records if r.module == "critic" and r.tags["run"] == "r1"]
    assert ledger.calls("policy", rollout=2) == [r for r in records if r.module == "policy" and r.tags.get("rollout") == "2"]
    assert ledger.calls("judge") == []


def test_last_finds_the_newest_record_with_the_tags_anywhere(where: Path | None) -> None:
    records = _records(100)
    ledger = _filled(where, records)
    for record in (records[-1], records[-3], records[40], records[0]):
        key = "bjudge_call" if "bjudge_call" in record.tags else "call_id"
        assert ledger.last(**{key: record.tags[key]}) == record
    noted = [r for r in records if "note" in r.tags]
    assert ledger.last(note=noted[0].tags["note"]) == noted[-1]  # a value whose bytes are escaped
    assert ledger.last(run="r0", task="t1") == next(r for r in reversed(records) if r.tags == r.tags | {"run": "r0", "task": "t1"})
    assert ledger.last(call_id="absent") is None
    if where is not None:  # lines this object did not write are decoded, not searched as bytes
        again = Ledger(where)
        assert again.last(call_id=records[40].tags.get("call_id", "x")) == (records[40] if "call_id" in records[40].tags else None)
        assert again.last(bjudge_call="absent") is None


def test_a_torn_tail_is_skipped_cut_and_continued_exactly(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    records = _records(30)
    _filled(path, records[:20])
    with path.open("ab") as fh:
        fh.write(records[20].model_dump_json().encode()[:57])  # killed mid-write
    ledger = Ledger(path)
    assert len(ledger) == 20 and list(ledger.records) == records[:20]
    for record in records[20:]:
        ledger.append(record)
    assert list(ledger.records) == records and list(reversed(ledger.records)) == records[::-1]
    assert Ledger.read(path) == records
    assert ledger.totals() == Ledger(path).totals()


def test_a_file_changed_under_an_open_ledger_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    ledger = _filled(path, _records(40))
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ValueError, match=r"ledger\.jsonl: record 3 is no longer where the ledger wrote it"):
        ledger.records[2]


def test_readers_in_other_asyncio_tasks_see_a_consistent_ledger_while_calls_land(where: Path | None) -> None:
    records = _records(400)

    async def scenario() -> None:
        ledger = Ledger(where)
        seen: list[CallRecord] = []
        newest: list[CallRecord | None] = []

        async def writer(part: list[CallRecord]) -> None:
            for record in part:
                ledger.append(record)
                await asyncio.sleep(0)

        async def reader() -> None:
            backwards, size_then = reversed(ledger.records), len(ledger)  # reversed: the length when asked
            for record in ledger.records:  # live, like a list's iterator
                seen.append(record)
                newest.append(ledger.records[-1])
                await asyncio.sleep(0)
            assert size_then > 0 and list(backwards) == records[:size_then][::-1]

        await asyncio.gather(writer(records[:200]), reader(), writer([]))
        await writer(records[200:])
        assert seen == records[:len(seen)] and len(seen) >= 200
        assert all(n is not None for n in newest)
        assert list(ledger.records) == records

    asyncio.run(scenario())


def test_a_reader_thread_reads_exact_records_while_another_thread_appends(tmp_path: Path) -> None:
    records = _records(2000)
    ledger = Ledger(tmp_path / "ledger.jsonl")
    wrong: list[str] = []
    done = threading.Event()

    def read() -> None:
        rng = random.Random(5)
        while not done.is_set() or rng.random() < 0.5:
            size = len(ledger)
            if size == 0:
                continue
            index = rng.randrange(size)
            for got, want in ((ledger.records[index], records[index]), (ledger.records[size - 1], records[size - 1])):
                if got != want:
                    wrong.append(f"{got.id} != {want.id}")
            tail = ledger.records[max(size - 9, 0):size]
            if list(tail) != records[max(size - 9, 0):size]:
                wrong.append(f"tail at {size}")

    thread = threading.Thread(target=read)
    thread.start()
    for record in records:
        ledger.append(record)
    done.set()
    thread.join()
    assert wrong == []
    assert list(ledger.records) == records
