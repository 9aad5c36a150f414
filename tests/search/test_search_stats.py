"""The search counters of a phase (search/stats.py): the node's and each shard's, and the time the
request's slow log sees."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from leafsearch.search import stats
from leafsearch.search.stats import SearchStats


def _targets(shards: int) -> list[SimpleNamespace]:
    index = SimpleNamespace(shards=[SimpleNamespace(search_stats=SearchStats()) for _ in range(shards)])
    return [SimpleNamespace(index=index, shard_id=i) for i in range(shards)]


def test_a_phase_over_several_shards_counts_in_each_and_its_time_once_in_the_slow_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(stats, "time", SimpleNamespace(perf_counter=lambda: float(next(ticks))))
    node, targets = SearchStats(), _targets(6)
    shards = [t.index.shards[t.shard_id].search_stats for t in targets]
    with stats.request_phases() as times, node.phase("query", targets):
        assert [s.counters["query_current"] for s in (node, *shards)] == [1] * 7
    assert [s.counters["query_current"] for s in (node, *shards)] == [0] * 7
    assert [s.counters["query_total"] for s in (node, *shards)] == [1] * 7
    # The phase's own time (one tick of the clock), not once per shard and once for the node.
    assert times.seconds == {"query": 1.0}


def test_a_failed_phase_is_counted_and_no_longer_current() -> None:
    node, targets = SearchStats(), _targets(2)
    try:
        with node.phase("fetch", targets):
            raise RuntimeError("the phase failed")
    except RuntimeError:
        pass
    shards = [t.index.shards[t.shard_id].search_stats for t in targets]
    assert [s.counters["fetch_current"] for s in (node, *shards)] == [0] * 3
    assert [s.counters["fetch_total"] for s in (node, *shards)] == [1] * 3
