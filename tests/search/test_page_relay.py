"""Which PIT pages a shard actor's bytes may answer as they are (search/page_relay.py). The pages
relayed through a Ray cluster, end to end: tests/ray_backend/test_ray_backend.py."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from leafsearch.request.search_request import parse_search_request
from leafsearch.search.page_relay import relayable, relayed_hits
from leafsearch.search.shard_api import FetchedPage, ShardFetchResult, ShardTopDocs

REMOTE = [SimpleNamespace(remote=True)] * 3
PLAIN = {"pit": {"id": "x"}, "size": 10, "sort": ["_shard_doc"], "track_total_hits": False}


def request(**changes: Any) -> Any:
    return parse_search_request({**PLAIN, **changes}, {}, indices=None)


def test_a_plain_shard_doc_page_of_shard_actors_is_relayable() -> None:
    assert relayable(request(), REMOTE)
    assert relayable(request(sort=[{"_shard_doc": "desc"}], _source=False, slice={"id": 1, "max": 2}), REMOTE)
    assert relayable(request(docvalue_fields=["n"], version=True, search_after=[5]), REMOTE)


@pytest.mark.parametrize(
    "changes",
    [
        {"track_total_hits": True},  # a total to count
        {"track_total_hits": 100},
        {"sort": [{"n": "asc"}, "_shard_doc"]},  # not a `_shard_doc` walk
        {"sort": ["_shard_doc"], "track_scores": True},  # a max score
        {"min_score": 1.0},
        {"aggs": {"a": {"max": {"field": "n"}}}},
        {"suggest": {"s": {"text": "x", "term": {"field": "t"}}}},
        {"profile": True},
        {"timeout": "1s"},  # `timed_out` may be true
        {"terminate_after": 5},
        {"size": 0},
        {"collapse": {"field": "k"}},
        {"_source": {"includes": ["n"]}},  # rendered per hit by the coordinator
    ],
)
def test_pages_whose_response_is_more_than_hits_and_a_fixed_head_are_not(changes: dict[str, Any]) -> None:
    assert not relayable(request(**changes), REMOTE)


def test_only_shard_actors_pages_are_relayable() -> None:
    assert not relayable(request(), [SimpleNamespace(remote=False)] * 3)
    assert not relayable(request(), [])


def top(docs: int, page: FetchedPage | None, **changes: Any) -> ShardTopDocs:
    answer = ShardTopDocs(0, docs, None, np.arange(docs, dtype=np.int64), None, [], page=page)
    for name, value in changes.items():
        setattr(answer, name, value)
    return answer


def fetched(start: int, end: int, data: bytes | None = b"[{}]", form: str = "page") -> FetchedPage:
    return FetchedPage(start, end, form, ShardFetchResult(0, data, None, 0))  # type: ignore[arg-type]


def test_the_shard_relays_a_page_it_fills_or_that_only_it_is_asked_for() -> None:
    page = request()  # size 10
    assert relayed_hits(top(10, fetched(0, 10)), page, alone=False) == b"[{}]"
    assert relayed_hits(top(4, fetched(0, 4)), page, alone=True) == b"[{}]"
    assert relayed_hits(top(0, FetchedPage(0, 0, "page", None)), page, alone=True) == b"[]"


def test_the_shard_relays_nothing_the_general_path_would_answer_otherwise() -> None:
    page = request()
    assert relayed_hits(top(4, fetched(0, 4)), page, alone=False) is None  # the next shards' hits
    assert relayed_hits(top(10, None), page, alone=True) is None  # no page fetched
    failed = FetchedPage(0, 10, "page", None, ValueError("fetch failed"))
    assert relayed_hits(top(10, failed), page, alone=True) is None
    assert relayed_hits(top(10, fetched(0, 10), timed_out=True), page, alone=True) is None
    assert relayed_hits(top(10, fetched(0, 10), terminated_early=True), page, alone=True) is None
    assert relayed_hits(top(10, fetched(0, 10, None, "hits")), page, alone=True) is None
