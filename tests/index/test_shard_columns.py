"""`IndexColumns` on a shard: the version map names buffered documents by position, through
buffer hand-overs, refreshes and a reopen that replays the translog's batch records."""

from __future__ import annotations

import orjson
import pytest

from leafsearch.errors import VersionConflict
from leafsearch.index import shard as shard_module
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.shard import Shard
from leafsearch.index.shard_write import ColumnOutcomes, IndexColumns, ShardWrite, apply_write

MAPPING = Mapping.from_body({"properties": {"n": {"type": "long"}, "msg": {"type": "text"}}})


def _parse(source: bytes, doc_id: str | None = None):
    return MAPPING.parse_document(source, doc_id)


def _write(shard: Shard, ids: list[str], n: int, *, create: bool = False) -> ColumnOutcomes:
    sources = [orjson.dumps({"n": n, "msg": f"word{n} {doc_id}"}) for doc_id in ids]
    batch = parse_batch(MAPPING, sources)
    assert batch is not None
    columns = IndexColumns(
        ids, [None] * len(ids), [create] * len(ids), [False] * len(ids), list(range(len(ids)))
    )
    with shard.writing() as point:
        outcomes = apply_write(shard, ShardWrite("i", "uuid", 0, (), batch, columns))
    shard.sync(point)
    return outcomes  # type: ignore[return-value]


def test_buffered_states_survive_hand_overs_refreshes_and_a_reopen(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(shard_module, "BUFFER_MAX_DOCS", 40)  # several buffers handed over
    shard = Shard(tmp_path / "s", 0, _parse)
    ids = [f"d{i}" for i in range(30)]
    seen_seq_nos: list[int] = []
    for round_ in range(1, 8):
        outcomes = _write(shard, ids, round_)
        assert outcomes.versions == [round_] * len(ids)
        assert outcomes.updated == (set() if round_ == 1 else set(range(len(ids))))
        seen_seq_nos += outcomes.seq_nos
        for i, doc_id in enumerate(ids):  # realtime, wherever the document is now
            state = shard.current(doc_id)
            assert state is not None and (state.version, state.seq_no) == (round_, outcomes.seq_nos[i])
            assert orjson.loads(shard.get_source(state))["n"] == round_
        if round_ == 4:
            shard.refresh()
    assert seen_seq_nos == list(range(len(seen_seq_nos)))
    refused = _write(shard, ids[:3] + ["new"], 99, create=True)
    assert set(refused.refused) == {0, 1, 2} and all(
        isinstance(e, VersionConflict) for e in refused.refused.values()
    )
    assert refused.versions[3] == 1 and refused.seq_nos[:3] == [-1, -1, -1]
    shard.translog.sync()
    for flushing in shard._flushing:
        flushing.built.result()  # the crashed shard writes nothing more
    # Reopened without a close: the buffered writes come back from the translog's batch records.
    reopened = Shard(tmp_path / "s", 0, _parse)
    for doc_id in ids:
        state = reopened.current(doc_id)
        assert state is not None and state.version == 7
    assert reopened.current("new").version == 1  # type: ignore[union-attr]
    assert reopened.max_seq_no == shard.max_seq_no
    reopened.close()
    shard.services.close()  # the crashed one's flush thread


@pytest.mark.parametrize("create", [False, True])
def test_an_id_twice_in_a_run_is_applied_in_order(tmp_path, create) -> None:
    shard = Shard(tmp_path / "s", 0, _parse)
    outcomes = _write(shard, ["a", "b", "a"], 1, create=create)
    assert list(outcomes)[0].result == "created"  # type: ignore[union-attr]
    if create:
        assert isinstance(list(outcomes)[2], VersionConflict)
    else:
        assert (list(outcomes)[2].result, list(outcomes)[2].version) == ("updated", 2)  # type: ignore[union-attr]
    shard.close()


def _segments_of_rounds(tmp_path, seed: int) -> tuple[Shard, list[str], dict[str, int]]:
    """A shard of 5 segments, ranges overlapping or apart, some ids updated or deleted: the
    shard, the names its ids were drawn from, and each live id's round."""
    import random

    rng = random.Random(seed)
    shard = Shard(tmp_path / "s", 0, _parse)
    names = [f"{rng.choice('bcmx')}{rng.randint(0, 300)}" for _ in range(400)]
    live: dict[str, int] = {}
    for round_ in range(1, 6):  # a segment per round, ranges overlapping or apart
        ids = list(dict.fromkeys(rng.sample(names, 60) + [f"r{round_}-{i}" for i in range(5)]))
        _write(shard, ids, round_)
        live.update(dict.fromkeys(ids, round_))
        for doc_id in rng.sample(ids, 5):
            prior = shard.current(doc_id)
            with shard.writing() as point:
                shard.delete(doc_id, prior, prior.version + 1)  # type: ignore[union-attr]
            shard.sync(point)
            del live[doc_id]
        shard.refresh()
    return shard, names, live


def _rounds_found(shard: Shard, asked: list[str]) -> dict[str, int]:
    states = shard.segment_states(asked)
    return {doc_id: orjson.loads(shard.get_source(state))["n"] for doc_id, state in states.items()}


@pytest.mark.parametrize("seed", range(3))
def test_segment_states_find_every_live_id_and_no_other(tmp_path, seed) -> None:
    """Ids before, between, inside and after the segments' ranges, prefixes of others, updated
    and deleted ones: each found in the segment holding its live version, or not at all."""
    shard, names, live = _segments_of_rounds(tmp_path, seed)
    asked = list(dict.fromkeys([*names, "a", "b", "b1", "b10", "z", "m", "r3", "r3-", "r9-0", *live]))
    assert _rounds_found(shard, asked) == live
    shard.close()


@pytest.mark.parametrize("seed", range(3))
def test_segment_states_of_batches_narrower_than_the_segments(tmp_path, seed) -> None:
    """Batches of neighbouring ids (a log's bulk beside its older segments), whose least or
    greatest id is a segment's first or last, or lies just before or after one, and batches of
    a single id: each finds exactly its live ids, as the segments' ranges skip the others."""
    shard, names, live = _segments_of_rounds(tmp_path, seed)
    bounds = [bytes(b).decode() for seg in shard.segments for b in (seg.id_terms[0], seg.id_terms[-1])]
    every = sorted({*names, *live, *bounds, "a", "r3-", "zz"})
    for width in (1, 2, 7):
        for at in range(len(every) - width + 1):
            asked = every[at : at + width]
            assert _rounds_found(shard, asked) == {i: live[i] for i in asked if i in live}, asked
    shard.close()
