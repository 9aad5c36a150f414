"""Search options each shard actor serves in its query phase, as Elasticsearch's shards do:
`rescore`, `terminate_after`, `search_after` and scrolls sorted by `_score` then fields, pages
past 10,000 hits and by-query batches above 10,000 once `index.max_result_window` is raised.

Through the REST API of a coordinator (`serve --ray`) on a local 3-node Ray cluster (one cluster
and one coordinator for the module), each request on the Ray-backed index `ray` is compared with
the same request on `local`, an index of the same documents and shard count written the same way
by a node started without Ray (a node keeps the shards of an index where they were created, so
the coordinator serves both): same hits in the same order, scores, totals, `terminated_early`.
A writer adds and deletes documents of `ray` with refreshes while it is read. Its documents have
no `body`, which every query matches on, so they change neither the matches nor the scores (the
BM25 statistics of `body`): what is compared stays defined while the index changes under it. Both
indices are written by one bulk, one segment per shard, so the merges the writer's segments
cause keep the original documents of a shard in one block, in their order (ties, and the
documents `terminate_after` collects, stay those of `local`; `_shard_doc` values may shift, so
walks compare the sort values before that tiebreaker). The by-query test rewrites `ray`: last.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.testing import Server
from tests import web
from tests.ray_cluster import ray_server, shard_actor
from tests.server_zygote import SERVER_ZYGOTE

SHARDS = 3
#: Past 10,000, so that a page and a by-query batch deeper than Elasticsearch's default window
#: hold documents.
DOCS = 10_300
WINDOW = 20_000
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]
_NDJSON = {"content-type": "application/x-ndjson"}


def source(n: int) -> dict[str, Any]:
    """Documents whose `body` is "all" and up to five words of six (varied scores, and many equal
    ones, so ties are compared too)."""
    rng = random.Random(n)
    words = ["all", *rng.choices(WORDS, k=rng.randint(0, 5))]
    return {"n": n, "v": n % 13, "tag": f"t{n % 7}", "body": " ".join(words)}


def bulk(http: httpx.Client, index: str, docs: dict[str, dict[str, Any]]) -> None:
    lines = []
    for doc_id, body in docs.items():
        lines += [orjson.dumps({"index": {"_index": index, "_id": doc_id}}), orjson.dumps(body)]
    response = http.post("/_bulk?refresh=true", content=b"\n".join(lines) + b"\n", headers=_NDJSON)
    assert response.status_code == 200 and response.json()["errors"] is False, response.text[:500]


def create(http: httpx.Client, index: str, shards: int = SHARDS, docs: int = DOCS) -> None:
    mappings = {"properties": {"n": {"type": "long"}, "v": {"type": "long"}, "tag": {"type": "keyword"}}}
    settings = {"number_of_shards": shards, "index.max_result_window": WINDOW}
    response = http.put(f"/{index}", json={"settings": settings, "mappings": mappings})
    assert response.status_code == 200, response.text
    bulk(http, index, {f"d{n}": source(n) for n in range(docs)})  # one segment per shard


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("ray-options") / "data"
    with (
        Server(data, popen=SERVER_ZYGOTE.popen) as plain,
        web.Client(base_url=plain.url, timeout=120) as http,
    ):
        create(http, "local")
        create(http, "local_one", shards=1, docs=600)
    with ray_server(ray_cluster.address, data) as server:
        with web.Client(base_url=server.url, timeout=120) as http:
            create(http, "ray")
            create(http, "ray_one", shards=1, docs=600)
            uuid = http.get("/ray/_settings").json()["ray"]["settings"]["index"]["uuid"]
            shard_actor(uuid, 0)  # (raises when `ray` is not on the cluster)
        yield server


@pytest.fixture
def http(coordinator: Server) -> Iterator[httpx.Client]:
    with web.Client(base_url=coordinator.url, timeout=120) as client:
        yield client


@contextmanager
def writing(http: httpx.Client) -> Iterator[None]:
    """A writer indexing and deleting documents without `body` in `ray`, each write refreshed,
    from its first write (waited for) until the block ends."""
    stop, started = threading.Event(), threading.Event()
    written: list[str] = []

    def run() -> None:
        with web.Client(base_url=str(http.base_url), timeout=120) as own:
            i = 0
            while not stop.is_set():
                bulk(own, "ray", {f"w{i}": {"n": DOCS + i, "v": i % 13, "tag": "t0"}})
                if i % 3 == 2:
                    deleted = own.delete(f"/ray/_doc/w{i - 1}", params={"refresh": "true"})
                    assert deleted.status_code == 200, deleted.text
                written.append(f"w{i}")
                started.set()
                i += 1

    thread = threading.Thread(target=run)
    thread.start()
    try:
        assert started.wait(120), "the writer never wrote"
        yield
    finally:
        stop.set()
        thread.join()


def search(
    http: httpx.Client, index: str, body: dict[str, Any], shards: int = SHARDS, **params: str
) -> dict[str, Any]:
    response = http.post(f"/{index}/_search", params=params, json=body)
    assert response.status_code == 200, response.text[:1000]
    answer = response.json()
    assert answer["_shards"] == {"total": shards, "successful": shards, "skipped": 0, "failed": 0}
    return answer


def answer_of(response: dict[str, Any]) -> dict[str, Any]:
    """What a response says of its hits (all but timings and ids of contexts)."""
    hits = response["hits"]
    return {
        "hits": [(h["_id"], h.get("_score"), h.get("sort")) for h in hits["hits"]],
        "total": hits.get("total"),
        "max_score": hits["max_score"],
        "terminated_early": response.get("terminated_early"),
        "aggregations": response.get("aggregations"),
    }


def same_answer(http: httpx.Client, body: dict[str, Any], **params: str) -> dict[str, Any]:
    """The request's answer on `ray`, after checking it is the answer on `local`."""
    remote = answer_of(search(http, "ray", body, **params))
    assert remote == answer_of(search(http, "local", body, **params)), body
    return remote


def rescorer(window: int, query: str, mode: str = "total", weights: tuple[float, float] = (1.0, 1.0)):
    return {
        "window_size": window,
        "query": {
            "rescore_query": {"match": {"body": query}},
            "score_mode": mode,
            "query_weight": weights[0],
            "rescore_query_weight": weights[1],
        },
    }


def test_rescore_is_each_shards_top_window_rescored(http: httpx.Client) -> None:
    query = {"match": {"body": "alpha beta"}}
    requests = [
        {"query": query, "size": 10, "rescore": rescorer(200, "gamma", weights=(0.7, 5.0))},
        # A window smaller than the page: the hits past each shard's window keep their score.
        {"query": query, "from": 3, "size": 30, "rescore": rescorer(4, "delta epsilon", "max")},
        {
            "query": {"match": {"body": "all zeta"}},
            "size": 25,
            "track_total_hits": True,
            "rescore": [rescorer(40, "alpha", "multiply"), rescorer(10, "gamma", "avg", (2.0, 0.5))],
        },
    ]
    with writing(http):
        answers = [same_answer(http, body) for body in requests]
        dfs = same_answer(http, requests[0], search_type="dfs_query_then_fetch")
    assert all(len(answer["hits"]) == body["size"] for answer, body in zip(answers, requests, strict=True))
    # The rescorers changed the order (else this compares first passes only).
    plain = answer_of(search(http, "local", {"query": query, "size": 10}))
    assert [h[0] for h in plain["hits"]] != [h[0] for h in answers[0]["hits"]]
    assert dfs["hits"] and dfs["total"] == answers[0]["total"]
    # A window above `index.max_rescore_window` (the result window here) is refused the same way.
    too_wide = {"query": query, "rescore": rescorer(WINDOW + 1, "gamma")}
    refused = [http.post(f"/{index}/_search", json=too_wide) for index in ("ray", "local")]
    assert [r.status_code for r in refused] == [400, 400] and refused[0].json() == refused[1].json()
    assert "Rescore window [20001] is too large" in refused[0].json()["error"]["root_cause"][0]["reason"]


def test_terminate_after_stops_each_shard(http: httpx.Client) -> None:
    query = {"match": {"body": "gamma"}}
    requests = [
        {"query": query, "size": 10, "terminate_after": 5, "track_total_hits": True},
        {"query": query, "size": 40, "terminate_after": 100, "sort": [{"n": "desc"}]},
        {"query": query, "size": 0, "terminate_after": 7, "aggs": {"tags": {"terms": {"field": "tag"}}}},
        {"query": {"match": {"body": "all"}}, "size": 3, "terminate_after": DOCS, "track_total_hits": True},
    ]
    with writing(http):
        answers = [same_answer(http, body) for body in requests]
    assert answers[0]["total"] == {"value": 5 * SHARDS, "relation": "eq"}
    assert answers[0]["terminated_early"] is True and len(answers[0]["hits"]) == 10
    assert answers[1]["terminated_early"] is True and len(answers[1]["hits"]) == 40
    assert answers[2]["aggregations"]["tags"]["buckets"]
    assert answers[3]["terminated_early"] is None and answers[3]["total"]["value"] == DOCS  # not reached


def pit_walk(http: httpx.Client, index: str, body: dict[str, Any], size: int) -> list[tuple]:
    """Every hit of a `search_after` walk on a PIT of `index`, in order, as (id, score, sort
    values but the PIT's `_shard_doc` tiebreaker)."""
    pit = http.post(f"/{index}/_pit", params={"keep_alive": "5m"}).json()["id"]
    hits: list[tuple] = []
    after = None
    try:
        while True:
            page = {**body, "size": size, "pit": {"id": pit, "keep_alive": "5m"}}
            if after is not None:
                page["search_after"] = after
            response = http.post("/_search", json=page)
            assert response.status_code == 200, response.text[:1000]
            found = response.json()["hits"]["hits"]
            if not found:
                return hits
            hits += [(h["_id"], h["_score"], h["sort"][:-1]) for h in found]
            after = found[-1]["sort"]
    finally:
        http.request("DELETE", "/_pit", json={"id": pit})


def scroll(http: httpx.Client, index: str, body: dict[str, Any]) -> list[tuple]:
    """Every hit of a scroll of `index`, in order, as (id, score, sort)."""
    response = http.post(f"/{index}/_search", params={"scroll": "5m"}, json=body)
    hits: list[tuple] = []
    while True:
        assert response.status_code == 200, response.text[:1000]
        data = response.json()
        assert data["_shards"]["failed"] == 0
        if not data["hits"]["hits"]:
            break
        hits += [(h["_id"], h["_score"], h["sort"]) for h in data["hits"]["hits"]]
        response = http.post("/_search/scroll", json={"scroll": "5m", "scroll_id": data["_scroll_id"]})
    http.request("DELETE", "/_search/scroll", json={"scroll_id": data["_scroll_id"]})
    return hits


def test_walks_sorted_by_score_then_fields_come_exactly_once_in_the_local_order(http: httpx.Client) -> None:
    should, below = [{"match": {"body": "alpha gamma"}}], {"range": {"n": {"lt": 3000}}}
    query = {"bool": {"should": should, "filter": below}}
    matches = search(http, "local", {"query": query, "size": 0, "track_total_hits": True})["hits"]["total"]
    by_tag = {"query": query, "sort": [{"_score": "desc"}, {"tag": "asc"}, {"n": "desc"}]}
    by_value = {"query": query, "sort": ["_score", "v"]}  # ties on (score, v): `_shard_doc` decides
    with writing(http):
        walks = [pit_walk(http, "ray", body, 211) for body in (by_tag, by_value)]
        scrolled = scroll(http, "ray", {**by_value, "size": 97})
    assert walks == [pit_walk(http, "local", body, 211) for body in (by_tag, by_value)]
    for walk in walks:
        assert len({doc_id for doc_id, _, _ in walk}) == len(walk) == matches["value"] > 1000
    assert scrolled == scroll(http, "local", {**by_value, "size": 97})
    assert [doc_id for doc_id, _, _ in scrolled] == [doc_id for doc_id, _, _ in walks[1]]
    # One page from a cursor anywhere in the order, without a PIT (the index's current snapshot).
    cursor = walks[0][777][2]
    page = same_answer(http, {**by_tag, "size": 50, "search_after": cursor})
    assert [h[0] for h in page["hits"]] == [doc_id for doc_id, _, _ in walks[0][778:828]]


def test_pages_past_ten_thousand_within_a_raised_window(http: httpx.Client) -> None:
    requests = [
        {"query": {"match": {"body": "all"}}, "from": 10_250, "size": 40, "sort": [{"n": "asc"}]},
        {"query": {"match": {"body": "all beta"}}, "from": 10_180, "size": 100},
        {"query": {"match": {"body": "all"}}, "size": 10_050, "_source": False, "sort": [{"v": "desc"}]},
    ]
    with writing(http):
        answers = [same_answer(http, body) for body in requests]
    assert [h[0] for h in answers[0]["hits"]] == [f"d{n}" for n in range(10_250, 10_290)]
    assert len(answers[1]["hits"]) == 100 and len(answers[2]["hits"]) == 10_050
    # Past the window, refused before anything is searched, as the local index refuses it.
    beyond = {"from": WINDOW - 10, "size": 11}
    refused = [http.post(f"/{index}/_search", json=beyond) for index in ("ray", "local")]
    assert [r.status_code for r in refused] == [400, 400] and refused[0].json() == refused[1].json()
    assert "Result window is too large" in refused[0].json()["error"]["root_cause"][0]["reason"]


def test_by_query_batches_above_ten_thousand_within_a_raised_window(http: httpx.Client) -> None:
    query = {"query": {"match": {"body": "all"}}}
    with writing(http):
        response = http.post(
            "/ray/_update_by_query", params={"scroll_size": "10200", "refresh": "true"}, json=query
        )
    assert response.status_code == 200, response.text
    done = response.json()
    assert done["failures"] == [] and done["total"] == done["updated"] == DOCS
    assert done["batches"] == 2 and done["version_conflicts"] == 0
    versions = search(http, "ray", {**query, "size": DOCS, "version": True, "_source": False})
    assert {hit["_version"] for hit in versions["hits"]["hits"]} == {2}
    # A batch above the window is refused as a scroll's is, before anything is written.
    refused = http.post("/ray/_update_by_query", params={"scroll_size": str(WINDOW + 1)}, json=query)
    assert refused.status_code == 400, refused.text
    assert "Batch size is too large" in refused.json()["error"]["root_cause"][0]["reason"]
    versions = search(http, "ray", {**query, "size": 1, "version": True, "_source": False})
    assert versions["hits"]["hits"][0]["_version"] == 2


def test_one_shard_answers_its_query_and_fetch_with_the_options(http: httpx.Client) -> None:
    """A search that asks one shard actor gets its page with the query (query_and_fetch.py): the
    options the shard serves come through that path too."""
    query = {"match": {"body": "alpha beta"}}
    requests = [
        {"query": query, "from": 2, "size": 7, "rescore": rescorer(30, "gamma", weights=(0.7, 5.0))},
        {"query": query, "size": 5, "terminate_after": 20, "track_total_hits": True},
        {"query": query, "size": 9, "sort": ["_score", {"tag": "desc"}, "n"]},
    ]
    for body in requests:
        remote = answer_of(search(http, "ray_one", body, shards=1))
        assert remote == answer_of(search(http, "local_one", body, shards=1)), body
        assert remote["hits"]
    sorted_page = answer_of(search(http, "local_one", requests[2], shards=1))["hits"]
    after = {**requests[2], "search_after": sorted_page[3][2]}
    assert answer_of(search(http, "ray_one", after, shards=1)) == answer_of(
        search(http, "local_one", after, shards=1)
    )
