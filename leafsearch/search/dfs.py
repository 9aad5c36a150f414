"""The DFS phase of `dfs_query_then_fetch`: every shard's term statistics as data, summed.

Elasticsearch scores a `dfs_query_then_fetch` search with the statistics of all its shards: a
first round asks each shard for the statistics its query reads (DfsSearchResult), the
coordinator sums them (AggregatedDfs) and sends the sum with every shard's query. Here a shard
answers `ShardSearch.dfs` with a `DfsStats`: the statistics its query read while running on its
own snapshot (`shard_stats`), keyed as bm25.py keys them (field statistics, document frequencies).
The coordinator sums the shards' (`DfsStats.total`) and each shard scores through `SummedStats`,
which answers from the sum and, for a statistic no shard read, from the shard itself.

Why record rather than list the query's terms: expansions (prefix, fuzzy, wildcard) are the
shard's own, found while planning on its snapshot, as Elasticsearch's per-shard rewrite finds them.
Cost: one more run of the query per shard (its matches are dropped); only DFS searches pay it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.search import bm25

if TYPE_CHECKING:
    from leafsearch.index.searcher import Searcher


@dataclass(frozen=True, slots=True)
class DfsStats:
    """Term and field statistics by bm25's keys: an int or a tuple of ints each (plain data)."""

    entries: dict[tuple, Any]

    @staticmethod
    def total(parts: Iterable[DfsStats]) -> DfsStats:
        """The statistics of several shards summed, key by key (a key some shard did not read
        counts what the others did, as Elasticsearch's AggregatedDfs merges per-shard terms)."""
        summed: dict[tuple, Any] = {}
        for part in parts:
            for key, value in part.entries.items():
                known = summed.get(key)
                if known is None:
                    summed[key] = value
                elif isinstance(value, tuple):
                    summed[key] = tuple(a + b for a, b in zip(known, value, strict=True))
                else:
                    summed[key] = known + value
        return DfsStats(summed)


class RecordingStats:
    """A shard snapshot's statistics, remembering every one its query reads (the DFS phase)."""

    def __init__(self, searcher: Searcher) -> None:
        self.searcher = searcher
        self.views = searcher.views  # expansions are the shard's own
        self._text: dict[tuple, Any] = {}

    def text_stats(self, field: str) -> tuple[int, int]:
        value = self.searcher.text_stats(field)
        self._text[("text_stats", field)] = value
        return value

    def doc_freq(self, field: str, term: str) -> int:
        return self.searcher.doc_freq(field, term)  # bm25 memoizes it under this object's key

    def recorded(self) -> DfsStats:
        return DfsStats({**self._text, **bm25.statistics_read(self)})


class SummedStats:
    """The statistics a shard scores with under DFS: the request's sum, else the shard's own."""

    def __init__(self, stats: DfsStats, searcher: Searcher) -> None:
        self.searcher = searcher
        self.views = searcher.views  # expansions are the shard's own
        self._entries = stats.entries
        bm25.seed_statistics(self, stats.entries)

    def text_stats(self, field: str) -> tuple[int, int]:
        value = self._entries.get(("text_stats", field))
        return value if value is not None else self.searcher.text_stats(field)

    def doc_freq(self, field: str, term: str) -> int:
        value = self._entries.get(("text_df", field, term))
        return value if value is not None else self.searcher.doc_freq(field, term)
