"""`LiveDocs`: the walk over every live document, located by position (a `_doc` scroll's batches
and the ends of the batches after them)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from leafsearch.search.hitlist import LiveDocs


def _view(doc_base: int, max_doc: int, deleted: list[int]) -> SimpleNamespace:
    live = None
    if deleted:
        live = np.ones(max_doc, dtype=bool)
        live[deleted] = False
    live_docs = np.arange(max_doc, dtype=np.int64) if live is None else np.flatnonzero(live)
    return SimpleNamespace(
        doc_base=doc_base, max_doc=max_doc, live=live, live_docs=live_docs, live_count=len(live_docs)
    )


def _targets() -> list[SimpleNamespace]:
    """Two shards: segments with and without deletions, one left empty by them."""
    shard0 = [_view(0, 7, [1, 5]), _view(7, 3, [0, 1, 2]), _view(10, 4, [])]
    shard1 = [_view(0, 5, [4]), _view(5, 6, [])]
    return [SimpleNamespace(searcher=SimpleNamespace(views=views)) for views in (shard0, shard1)]


@pytest.mark.parametrize("sliced", [False, True])
def test_documents_at_positions_are_those_of_their_ranges(sliced: bool) -> None:
    targets = _targets()
    selected = None
    if sliced:  # every other live document of each segment, as a slice keeps
        views = [v for t in targets for v in t.searcher.views]
        selected = [v.live_docs[::2] for v in views]
    docs = LiveDocs(targets, selected)
    everything = docs.take(0, docs.total)
    assert len(everything[1]) == docs.total
    for positions in ([0], [docs.total - 1], list(range(docs.total)), [2, 3, 9, docs.total - 1]):
        at = docs.at(np.array(positions, dtype=np.int64))
        assert at[0].tolist() == everything[0][positions].tolist()
        assert at[1].tolist() == everything[1][positions].tolist()
        for position, target, doc in zip(positions, *at, strict=True):
            assert docs.take(position, position + 1)[1].tolist() == [doc]
            assert docs.take(position, position + 1)[0].tolist() == [target]


def test_no_positions_are_no_documents() -> None:
    at = LiveDocs(_targets()).at(np.empty(0, np.int64))
    assert at[0].tolist() == [] and at[1].tolist() == []


@pytest.mark.parametrize("sliced", [False, True])
def test_every_range_is_the_documents_at_its_positions(sliced: bool) -> None:
    """A range inside one segment, across several (one emptied by deletions), up to the end."""
    targets = _targets()
    selected = None
    if sliced:
        selected = [v.live_docs[1::2] for t in targets for v in t.searcher.views]
    docs = LiveDocs(targets, selected)
    everything = docs.take(0, docs.total)
    for lo in range(docs.total + 1):
        for hi in range(lo, docs.total + 2):
            got = docs.take(lo, hi)
            assert got[0].tolist() == everything[0][lo:hi].tolist()
            assert got[1].tolist() == everything[1][lo:hi].tolist()
