"""A replica's side of a write: the translog records its primary logged, applied with the primary's
seq_nos and versions in whatever order they arrive, durable and replayed the same way."""

from __future__ import annotations

import threading
from functools import partial

import orjson
import pytest

from leafsearch.errors import ElasticError
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.shard import Shard
from leafsearch.index.shard_write import apply_replicated
from tests.index.test_engine_shard import parse, visible_ids


def logged(shard: Shard, apply) -> bytes:
    """What `apply` logged on `shard` (a primary's write), as its replicas receive it."""
    with shard.writing() as point:
        shard.translog.recording = records = []
        try:
            apply()
        finally:
            shard.translog.recording = None
    shard.sync(point)
    return b"".join(records)


def put(shard: Shard, doc_id: str, body: dict) -> bytes:
    def apply() -> None:
        prior = shard.current(doc_id)
        version = prior.version + 1 if prior is not None and prior.version > 0 else 1
        shard.index(doc_id, parse(orjson.dumps(body)), None, prior, version)

    return logged(shard, apply)


def delete(shard: Shard, doc_id: str) -> bytes:
    prior = shard.current(doc_id)
    return logged(shard, lambda: shard.delete(doc_id, prior, prior.version + 1))


def replicate(replica: Shard, records: bytes) -> None:
    with replica.writing() as point:
        apply_replicated(replica, records)
    replica.sync(point)


def state(shard: Shard, doc_id: str) -> tuple[int, int, bool] | None:
    current = shard.current(doc_id)
    return None if current is None else (current.version, current.seq_no, current.deleted)


def test_a_replica_applying_its_primarys_writes_in_any_order_ends_as_the_primary(tmp_path):
    primary = Shard(tmp_path / "p", 0, parse)
    replica = Shard(tmp_path / "r", 0, parse)
    writes = [put(primary, str(i % 5), {"msg": f"round {i}", "n": i}) for i in range(20)]
    writes.append(delete(primary, "3"))
    for records in reversed(writes):  # the newest first: every older one is superseded
        replicate(replica, records)
    for doc_id in map(str, range(5)):
        assert state(replica, doc_id) == state(primary, doc_id)
    assert replica.max_seq_no == primary.max_seq_no == 20
    primary.refresh()
    replica.refresh()
    assert visible_ids(replica) == visible_ids(primary) == {"0", "1", "2", "4"}
    # After a crash, the replica's translog replays to the same state, its order kept.
    replica.translog._file.close()
    reopened = Shard(tmp_path / "r", 0, parse)
    for doc_id in ("0", "1", "2", "4"):
        assert state(reopened, doc_id) == state(primary, doc_id)
    assert state(reopened, "3") in (None, state(primary, "3"))  # (a refreshed delete leaves no tombstone)
    assert reopened.get_source(reopened.current("4")) == orjson.dumps({"msg": "round 19", "n": 19})
    reopened.close()
    primary.close()


def test_concurrent_writers_replicated_concurrently_match_the_primary(tmp_path):
    primary = Shard(tmp_path / "p", 0, parse)
    replica = Shard(tmp_path / "r", 0, parse)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(40):
                replicate(replica, put(primary, str((n * 7 + i) % 11), {"msg": "x", "n": n * 100 + i}))
        except BaseException as exc:  # the test's failure, reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    refresher = threading.Thread(target=lambda: [replica.refresh() for _ in range(20)])
    for thread in [*threads, refresher]:
        thread.start()
    for thread in [*threads, refresher]:
        thread.join()
    assert not errors
    for doc_id in map(str, range(11)):
        assert state(replica, doc_id) == state(primary, doc_id)
        assert replica.get_source(replica.current(doc_id)) == primary.get_source(primary.current(doc_id))
    replica.close()
    primary.close()


def test_torn_records_are_refused_and_change_nothing(tmp_path):
    primary = Shard(tmp_path / "p", 0, parse)
    replica = Shard(tmp_path / "r", 0, parse)
    records = put(primary, "a", {"msg": "a"})
    with pytest.raises(ElasticError, match="torn"):
        replicate(replica, records[:-3])
    assert replica.current("a") is None and replica.max_seq_no == -1
    replica.close()
    primary.close()


def test_a_run_of_index_operations_is_applied_by_column_as_one_by_one(tmp_path):
    """A replica parses a run of index operations on distinct ids in one batch (its primary's
    bulk), skipping those already superseded, with the same result as the per-operation replay."""
    mapping = Mapping.from_body({"properties": {"msg": {"type": "text"}, "n": {"type": "long"}}})
    primary = Shard(tmp_path / "p", 0, mapping.parse_document)
    by_column = Shard(tmp_path / "c", 0, mapping.parse_document)
    one_by_one = Shard(tmp_path / "o", 0, mapping.parse_document)
    first = logged(primary, lambda: _index_all(primary, mapping, range(0, 50), "first"))
    second = logged(primary, lambda: _index_all(primary, mapping, range(25, 75), "second"))
    for replica, batch in ((by_column, partial(parse_batch, mapping)), (one_by_one, None)):
        for records in (second, first):  # the newer first: half of `first` is superseded
            with replica.writing() as point:
                assert apply_replicated(replica, records, batch) == 50
            replica.sync(point)
    for doc_id in (str(i) for i in range(75)):
        assert state(by_column, doc_id) == state(one_by_one, doc_id) == state(primary, doc_id)
        assert by_column.get_source(by_column.current(doc_id)) == primary.get_source(primary.current(doc_id))
    for shard in (primary, by_column, one_by_one):
        shard.refresh()
    assert visible_ids(by_column) == visible_ids(primary) == {str(i) for i in range(75)}
    for shard in (primary, by_column, one_by_one):
        shard.close()


def _index_all(shard: Shard, mapping: Mapping, numbers: range, word: str) -> None:
    for i in numbers:
        prior = shard.current(str(i))
        version = prior.version + 1 if prior is not None else 1
        shard.index(
            str(i), mapping.parse_document(orjson.dumps({"msg": word, "n": i}), str(i)), None, prior, version
        )
