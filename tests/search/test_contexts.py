"""Reader contexts in-process: the in-use protocol that keeps a context's snapshots alive while a
request reads them, expiry counted from the end of the last request, ids that do not survive a
and ids that survive one (the restart's own tests are in test_durable_contexts.py), and the
`_doc` scroll that walks live documents without building a sorted match list.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import FakeClock
from inprocess import search

from leafsearch import Node
from leafsearch.errors import ElasticError, SearchContextMissing
from leafsearch.indices import admin
from leafsearch.search import hitlist, top_hits, walks
from leafsearch.search.contexts import ReaderContext


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def node(tmp_path: Path, clock: FakeClock) -> Iterator[Node]:
    """A node without background threads (the test runs the reaper), on a clock the test advances,
    and 300 documents on 2 shards."""
    with Node(tmp_path / "node", background=False, clock=clock) as n:
        admin.create_index(n, "t", {"settings": {"number_of_shards": 2}})
        n.bulk(
            b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(300)),
            index="t",
            refresh="true",
        )
        yield n


def open_scroll(node: Node, keep_alive: str = "1m", **body) -> tuple[str, ReaderContext]:
    first = search(node, "t", {"size": 10, **body}, {"scroll": keep_alive})
    ctx = max(node.contexts._contexts.values(), key=lambda c: c.ctx_id)
    assert ctx.public_id == first["_scroll_id"]
    return first["_scroll_id"], ctx


def is_open(node: Node, public_id: str) -> bool:
    return public_id in {row["id"] for row in node.search_contexts()}


def refs(ctx: ReaderContext) -> list[int]:
    return [t.searcher._refs for t in ctx.targets]


def test_a_context_freed_while_in_use_keeps_its_snapshots_until_the_request_ends(node: Node) -> None:
    scroll_id, ctx = open_scroll(node)
    node.scroll(scroll_id, "1m")  # a second batch of this `_score` scroll keeps its list of matches
    held = refs(ctx)
    in_use = node.contexts.acquire(scroll_id, "scroll")
    assert in_use is ctx
    assert node.clear_scroll([scroll_id])["num_freed"] == 1
    assert ctx.freed and ctx.ctx_id in node.contexts.walks.held() and refs(ctx) == held
    with pytest.raises(SearchContextMissing, match="cleared"):
        node.contexts.acquire(scroll_id, "scroll")
    node.contexts.release(ctx)
    assert ctx.ctx_id not in node.contexts.walks.held() and refs(ctx) == [r - 1 for r in held]


def test_the_reaper_skips_a_context_in_use_and_expiry_counts_from_the_end_of_the_request(
    node: Node, clock: FakeClock
) -> None:
    scroll_id, ctx = open_scroll(node, keep_alive="100ms")
    node.contexts.acquire(scroll_id, "scroll")
    clock.advance(0.2)
    node.contexts.reap()
    assert is_open(node, scroll_id) and not ctx.freed  # in use: never reaped
    node.contexts.release(ctx, keep_alive=0.5)
    clock.advance(0.5)
    node.contexts.reap()
    assert is_open(node, scroll_id)  # the keep-alive counts from the end of the request
    clock.advance(0.001)
    node.contexts.reap()
    assert ctx.freed and ctx.ctx_id not in node.contexts.walks.held() and not is_open(node, scroll_id)
    with pytest.raises(SearchContextMissing, match="expired"):
        node.contexts.acquire(scroll_id, "scroll")
    assert node.search_stats.snapshot()["scroll_current"] == 0


def test_expiry_is_checked_on_access(node: Node, clock: FakeClock) -> None:
    scroll_id, ctx = open_scroll(node, keep_alive="50ms")
    clock.advance(0.05)
    scroll_id = node.scroll(scroll_id, "50ms")["_scroll_id"]  # not yet: its keep-alive is whole
    clock.advance(0.051)
    with pytest.raises(ElasticError) as gone:
        node.scroll(scroll_id, "1m")
    assert gone.value.status == 404 and "expired" in str(gone.value.caused_by)
    assert ctx.freed


def test_ids_survive_a_restart_and_another_node_s_are_unknown(tmp_path: Path) -> None:
    path = tmp_path / "node"
    with Node(path, background=False) as first:
        admin.create_index(first, "t", {})
        first.bulk(b'{"index":{"_id":"1"}}\n{}\n{"index":{"_id":"2"}}\n{}\n', index="t", refresh="true")
        old_id = search(first, "t", {"size": 1, "sort": ["_doc"]}, {"scroll": "1m"})["_scroll_id"]
        cleared = search(first, "t", {"size": 1}, {"scroll": "1m"})["_scroll_id"]
        assert first.clear_scroll([cleared])["num_freed"] == 1
    with Node(path, background=False) as second:
        assert [h["_id"] for h in second.scroll(old_id, "1m")["hits"]["hits"]] == ["2"]
        with pytest.raises(SearchContextMissing, match="cleared at"):  # remembered across the restart
            second.contexts.acquire(cleared, "scroll")
        new_id = search(second, "t", {"size": 1}, {"scroll": "1m"})["_scroll_id"]
        assert second.contexts.decode_id("garbage", "scroll") is None
        assert second.contexts.decode_id(new_id, "pit") is None
    with Node(tmp_path / "other", background=False) as other:
        with pytest.raises(SearchContextMissing, match="not opened by this node"):
            other.contexts.acquire(new_id, "scroll")
        assert other.clear_scroll([new_id])["num_freed"] == 0


def test_scrolls_build_no_match_list_but_a_score_walk_from_its_second_batch(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `_doc` scroll reads live documents, a field-sorted one (sliced too) pages from its
    cursor: neither builds a list of every match. A scroll sorted by `_score` builds one, at its
    second batch (its first is top hits)."""
    node.bulk(b"".join(b'{"delete":{"_id":"%d"}}\n' % i for i in range(0, 300, 3)), index="t", refresh="true")

    def refuse(*args, **kwargs):
        raise AssertionError("a match list was built")

    monkeypatch.setattr(walks, "build_hitlist", refuse)
    monkeypatch.setattr(hitlist, "build_hitlist", refuse)
    bodies = (
        {"sort": ["_doc"]},
        {"sort": [{"_doc": "asc"}], "slice": {"id": 1, "max": 3}},
        {"sort": [{"n": "desc"}]},
        {"sort": [{"n": "asc"}], "slice": {"id": 0, "max": 2}, "query": {"range": {"n": {"gte": 10}}}},
    )
    for body in bodies:
        first = search(node, "t", {**body, "size": 64}, {"scroll": "1m"})
        ids = [hit["_id"] for hit in first["hits"]["hits"]]
        batch = first
        while batch["hits"]["hits"]:
            batch = node.scroll(batch["_scroll_id"], "1m")
            assert batch["hits"]["total"] == first["hits"]["total"]
            ids += [hit["_id"] for hit in batch["hits"]["hits"]]
        assert len(ids) == len(set(ids)) == first["hits"]["total"]["value"]
        assert all(int(i) % 3 for i in ids)
        node.clear_scroll([first["_scroll_id"]])
    scored = search(node, "t", {"size": 64}, {"scroll": "1m"})
    with pytest.raises(AssertionError, match="match list"):
        node.scroll(scored["_scroll_id"], "1m")
    node.clear_scroll([scored["_scroll_id"]])
    monkeypatch.setattr(top_hits, "top_hits", refuse)
    with pytest.raises(AssertionError, match="match list"):
        search(node, "t", {"sort": ["n"]}, {"scroll": "1m"})
    assert node.contexts.open_count() == 0  # the failed opening freed its context


def test_describe_lists_open_contexts_oldest_first(node: Node) -> None:
    scroll_id, _ = open_scroll(node, keep_alive="2m")
    pit_id = node.open_pit("t", "90s")["id"]
    scroll_id = node.scroll(scroll_id, "3m")["_scroll_id"]
    rows = node.search_contexts()
    assert [(r["id"], r["type"], r["indices"], r["keep_alive"], r["requests"], r["docs"]) for r in rows] == [
        (scroll_id, "scroll", "t", "3m", 2, 300),
        (pit_id, "pit", "t", "1.5m", 0, 300),
    ]
    assert rows[0]["segments"] >= 2  # one per shard at least


def test_restored_contexts_have_their_whole_keep_alive_and_count_against_the_limits(tmp_path: Path) -> None:
    path = tmp_path / "node"
    with Node(path, background=False, clock=FakeClock()) as first:
        admin.create_index(first, "t", {"settings": {"number_of_shards": 2}})
        first.bulk(b'{"index":{"_id":"1"}}\n{}\n', index="t", refresh="true")
        first.cluster_settings.update({"persistent": {"search.max_open_pit_context": 1}})
        pit_id = first.open_pit("t", "1m")["id"]
        first.clock.advance(50)  # 10 s of its keep-alive left when the node stops
    clock = FakeClock()
    with Node(path, background=False, clock=clock) as second:
        clock.advance(59)  # a restart counts as a use: a whole minute from the restart
        second.contexts.reap()
        assert [row["id"] for row in second.search_contexts()] == [pit_id]
        with pytest.raises(ElasticError, match="Trying to create too many Point In Time contexts"):
            second.open_pit("t", "1m")
        clock.advance(2)
        with pytest.raises(SearchContextMissing, match="expired"):
            second.contexts.acquire(pit_id, "pit")
        assert not list((path / "contexts").glob("*.ctx"))
        assert not any(any(p.iterdir()) for p in path.glob("indices/*/*/pins"))


def test_pins_whose_record_was_never_written_are_dropped_at_start(tmp_path: Path) -> None:
    path = tmp_path / "node"
    with Node(path, background=False) as first:
        admin.create_index(first, "t", {})
        first.bulk(b'{"index":{"_id":"1"}}\n{}\n', index="t", refresh="true")
        pit_id = first.open_pit("t", "1m")["id"]
        kept = first.open_pit("t", "1m")["id"]
        key = first.contexts.get(pit_id, "pit").key
    (path / "contexts" / f"{key}.ctx").unlink()  # as if the node died before writing it
    with Node(path, background=False) as second:
        with pytest.raises(SearchContextMissing, match="never opened"):
            second.contexts.acquire(pit_id, "pit")
        assert [row["id"] for row in second.search_contexts()] == [kept]
        assert [p.stem for p in path.glob("indices/*/*/pins/*.npz")] == [second.contexts.get(kept, "pit").key]


def test_the_same_scroll_id_sent_at_once_by_two_clients_answers_one_batch_twice(node: Node) -> None:
    first = search(node, "t", {"size": 7, "sort": ["n"]}, {"scroll": "1m"})
    answers: list[dict] = []
    start = threading.Barrier(4)

    def ask() -> None:
        start.wait()
        answers.append(node.scroll(first["_scroll_id"], "1m"))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(answer == answers[0] for answer in answers)  # one batch, its `took` included
    assert [int(hit["_id"]) for hit in answers[0]["hits"]["hits"]] == list(range(7, 14))
    after = node.scroll(answers[0]["_scroll_id"], "1m")
    assert [int(hit["_id"]) for hit in after["hits"]["hits"]] == list(range(14, 21))
    ours, key, seq, token = node.contexts.decode_id(after["_scroll_id"], "scroll")
    for ahead in (seq + 1, seq + 1000):  # a position not reached yet was never issued
        with pytest.raises(ElasticError) as refused:
            node.scroll(node.contexts.encode_id("scroll", key, ahead, token), "1m")
        assert refused.value.status == 404 and "never opened" in str(refused.value.caused_by)
    with pytest.raises(ElasticError) as moved:
        node.scroll(first["_scroll_id"], "1m")
    assert moved.value.status == 404 and "moved past this batch" in str(moved.value.caused_by)


@pytest.mark.parametrize("body", [{"sort": ["_doc"]}, {"sort": [{"n": "desc"}]}], ids=["doc", "sorted"])
def test_a_scroll_records_batches_ahead_and_any_crash_between_them_loses_and_repeats_nothing(
    tmp_path: Path, body: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's record names the ends of the next batches its walk knows, so most batches write
    none; a crash after any batch (the data folder as it is then, copied: what `kill -9` leaves)
    and a restart go on after the batch the client received, and its id before replays it."""
    path = tmp_path / "node"
    writes: list[int] = []
    with Node(path, background=False) as live:
        admin.create_index(live, "t", {"settings": {"number_of_shards": 2}})
        docs = b"".join(b'{"index":{"_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(300))
        live.bulk(docs, index="t", refresh="true")
        records = live.contexts.records
        write = records.write
        monkeypatch.setattr(records, "write", lambda key, record: writes.append(1) or write(key, record))
        batch = search(live, "t", {**body, "size": 20}, {"scroll": "1m"})
        batches, crashed = [batch], []
        while batch["hits"]["hits"]:
            crashed.append(tmp_path / f"crash{len(crashed)}")
            shutil.copytree(path, crashed[-1])
            batch = live.scroll(batch["_scroll_id"], "1m")
            batches.append(batch)
    walked = [h["_id"] for b in batches for h in b["hits"]["hits"]]
    assert sorted(walked, key=int) == [str(i) for i in range(300)]
    assert len(writes) <= len(batches) // 4  # one record per up to 9 batches (not one per batch)
    for k in (1, 2, 5, 8, 9, 10, 14):  # after batch k was received: crashed[k] holds what was durable
        monkeypatch.undo()
        with Node(crashed[k], background=False) as restarted:
            again = restarted.scroll(batches[k - 1]["_scroll_id"], "1m")  # batch k asked again
            assert again["hits"]["hits"] == batches[k]["hits"]["hits"], k
            rest = [restarted.scroll(again["_scroll_id"], "1m")]
            while rest[-1]["hits"]["hits"]:
                rest.append(restarted.scroll(rest[-1]["_scroll_id"], "1m"))
        assert [h["_id"] for b in rest for h in b["hits"]["hits"]] == walked[20 * (k + 1) :], k


def _scroll_context() -> ReaderContext:
    """A scroll's context at batch 3, its record naming the ends of batches 4 and 5 ahead."""
    ctx = ReaderContext(1, "scroll", "k", "id3", "t", [], 60.0, 0.0, 0.0)
    ctx.seq, ctx.cursor, ctx.ahead = 3, [300], [[400], [500]]
    return ctx


def test_batches_a_worker_answered_move_the_scroll_in_order_and_stale_ones_are_dropped() -> None:
    ctx = _scroll_context()
    ctx.note([(4, "id4", [400], 7)])  # nobody holds the lock: applied at once
    assert (ctx.seq, ctx.public_id, ctx.prev_cursor, ctx.cursor, ctx.prev_took) == (4, "id4", [300], [400], 7)
    assert ctx.ahead == [[500]] and ctx.unrecorded
    with ctx.lock:  # held (a request on the general path): applied by the holder
        ctx.note([(4, "id4", [400], 9)])  # stale: that batch was answered already
        ctx.note([(5, "id5", [999], 9)])  # not where the record said: never applied
        assert ctx.seq == 4
        ctx.apply_notes()
    assert (ctx.seq, ctx.cursor, ctx.prev_took, ctx.ahead) == (4, [400], 7, [[500]])


def test_batches_told_together_move_the_scroll_past_each() -> None:
    ctx = _scroll_context()
    ctx.note([(4, "id4", [400], 7), (5, "id5", [500], 8)])
    assert (ctx.seq, ctx.public_id, ctx.prev_cursor, ctx.cursor, ctx.prev_took) == (5, "id5", [400], [500], 8)
    assert ctx.ahead == [] and ctx.unrecorded


def test_a_request_for_an_id_past_the_scroll_waits_for_the_workers_note() -> None:
    ctx = _scroll_context()
    told = threading.Event()

    def worker() -> None:
        told.wait()
        ctx.note([(4, "id4", [400], 7)])

    thread = threading.Thread(target=worker)
    thread.start()
    with ctx.lock:
        told.set()
        ctx.apply_notes(until=4, timeout=60)
        assert ctx.seq == 4
    thread.join()
    with ctx.lock:  # no note coming: the wait ends at its timeout, nothing moved
        ctx.apply_notes(until=5, timeout=0.01)
        assert ctx.seq == 4
