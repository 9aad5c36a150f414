"""The shard interface: what crosses it is data, and merging the shards' top hits gives exactly
the page the full sort of every match gives, also when the indices of one search map a sort field
differently (long in one, double in another; keywords with different terms). A search whose every
shard message and answer goes through pickle (query, fetch, DFS) answers the same bytes as the
in-process one, for every fetch option."""

from __future__ import annotations

import pickle
import random
import time

import orjson
import pytest
from pickled_shard import PickledShard

import leafsearch
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.rest.render import to_json
from leafsearch.search import phases, query_and_fetch, top_hits
from leafsearch.search.dfs import DfsStats
from leafsearch.search.fetch_phase import last_sort_values
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import build_hitlist
from leafsearch.search.phases import page_bounds
from leafsearch.search.rescore import rescore
from leafsearch.search.shard_api import FetchAlong, ShardDfs, ShardQuery
from leafsearch.search.targets import acquire_targets, release_targets

WORDS = ["red", "green", "blue"]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    """Two indices of two shards each: `v` is a long in one and a double in the other, `k` a
    keyword whose terms differ between them."""
    rng = random.Random(11)
    with leafsearch.Node(tmp_path_factory.mktemp("shards") / "node", background=False) as node:
        for name, v_type, terms in (("ints", "long", ["a", "c", "e"]), ("floats", "double", ["b", "c", "f"])):
            mapping = {"properties": {"v": {"type": v_type}, "k": {"type": "keyword"}, "t": {"type": "text"}}}
            admin.create_index(node, name, {"settings": {"number_of_shards": 2}, "mappings": mapping})
            for batch in range(3):
                for i in range(50):
                    doc: dict = {"t": " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))}
                    if rng.random() < 0.9:
                        doc["v"] = rng.randint(-9, 9) if v_type == "long" else rng.randint(-18, 18) / 2
                    if rng.random() < 0.8:
                        doc["k"] = rng.choice(terms)
                    routing = "r1" if i % 7 == 0 else None
                    node.index_doc(name, f"{batch}-{i}", orjson.dumps(doc), routing=routing)
                node.indices[name].refresh()
        yield node


def _page(hits, request) -> list[tuple[int, int]]:
    start, end = page_bounds(hits, request)
    return list(zip(hits.target[start:end].tolist(), hits.doc[start:end].tolist(), strict=True))


def _sorted_body(rng: random.Random, tiebreakers: list) -> dict:
    """A search sorted by `v` or `k` (either order, missing first or last), half the time then
    by one of `tiebreakers`, a page of 1, 7 or 30 from 0 or 4."""
    field = rng.choice(["v", "k"])
    sort = [{field: {"order": rng.choice(["asc", "desc"]), "missing": rng.choice(["_first", "_last"])}}]
    if rng.random() < 0.5:
        sort.append(rng.choice(tiebreakers))
    query = rng.choice([{"match_all": {}}, {"match": {"t": rng.choice(WORDS)}}])
    return {"query": query, "sort": sort, "from": rng.choice([0, 4]), "size": rng.choice([1, 7, 30])}


@pytest.mark.parametrize("seed", range(60))
def test_shards_queried_through_pickled_requests_merge_to_the_full_sort_page(node, seed: int) -> None:
    """Every ShardQuery and ShardTopDocs goes through pickle (as to a shard in another process);
    the merged page equals the page of the full sort over both indices."""
    body = _sorted_body(random.Random(seed), [{"v": "asc"}, {"k": "asc"}])
    request = parse_search_request(body, {})
    targets = acquire_targets([node.indices["floats"], node.indices["ints"]])
    try:
        now = int(time.time() * 1000)
        full = build_hitlist(
            targets, request, now_millis=now, with_aggs=None, guard=SearchGuard(time.monotonic, None)
        )
        plan = top_hits.sort_plan(request, targets)
        results = []
        for i, target in enumerate(targets):
            shard_query = pickle.loads(pickle.dumps(ShardQuery(request, i, now, plan, aggs=False)))
            result = top_hits.LocalShard(node.search_services, target, None).query(shard_query)
            results.append(pickle.loads(pickle.dumps(result)))
        merged = top_hits.merge_top_docs(targets, request, plan, results)
        assert _page(merged, request) == _page(full, request), body
        assert merged.total == full.total
    finally:
        release_targets(targets)


def test_a_search_over_both_indices_through_the_node_sorts_longs_and_doubles_together(node) -> None:
    """Through `Node.search`, with the shards run at once: the values of both indices in one order."""
    from inprocess import search

    body = {"query": {"exists": {"field": "v"}}, "sort": [{"v": "desc"}, {"k": "asc"}], "size": 40}
    hits = search(node, "ints,floats", body)["hits"]["hits"]
    values = [h["sort"][0] for h in hits]
    assert values == sorted(values, reverse=True)
    assert {h["_index"] for h in hits} == {"ints", "floats"}
    assert any(isinstance(v, float) and not v.is_integer() for v in values)


def _fetch_options(rng: random.Random) -> dict:
    """A random mix of the options a hit's rendering reads."""
    body: dict = {}
    source = rng.choice([None, True, False, ["k"], {"excludes": ["t"]}])
    if source is not None:
        body["_source"] = source
    if rng.random() < 0.3:
        body["fields"] = rng.choice([["v"], ["k", "t"], ["*"]])
    if rng.random() < 0.3:
        body["docvalue_fields"] = rng.choice([["k"], [{"field": "v", "format": "0.00"}], ["v", "k"]])
    if rng.random() < 0.1 and source is False and "fields" not in body:
        body["stored_fields"] = "_none_"
    for flag in ("version", "seq_no_primary_term", "track_scores", "explain"):
        if rng.random() < 0.25:
            body[flag] = True
    return body


def _search_body(rng: random.Random) -> dict:
    query = rng.choice([{"match_all": {}}, {"match": {"t": rng.choice(WORDS)}}, {"term": {"k": "c"}}])
    body = {"query": query, "from": rng.choice([0, 3]), "size": rng.choice([1, 5, 40])}
    if rng.random() < 0.7:
        field = rng.choice(["v", "k"])
        body["sort"] = [{field: {"order": rng.choice(["asc", "desc"])}}, rng.choice(["_score", "_doc"])]
    return {**body, **_fetch_options(rng)}


def _response(node, index: str, body: dict, params: dict, shards_of=None) -> bytes:
    """The REST body of a search (without `took`), its shards local or wrapped by `shards_of`."""
    request = parse_search_request(body, params, indices=index)
    targets = phases.resolve_targets(node.search_services, request)
    try:
        phases.check_limits(node.search_services, request, targets)
        shards = None if shards_of is None else shards_of(targets)
        hits, tree = phases.query_phase(node.search_services, targets, request, aggs=True, shards=shards)
        start, end = page_bounds(hits, request)
        response = phases.response(
            node.search_services,
            hits,
            request,
            start,
            end,
            0.0,
            agg_tree=tree,
            extra={},
            raw_hits=True,
            shards=shards,
        )
    finally:
        release_targets(targets)
    response.pop("took")
    return to_json(response)


def _pickled(node):
    return lambda targets: [
        PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, targets)
    ]


@pytest.mark.parametrize("seed", range(80))
def test_a_search_through_pickled_shard_messages_answers_the_same_bytes(node, seed: int) -> None:
    """Query, fetch (and DFS) messages and answers pickled, as to shards in another process: the
    response is byte for byte the in-process one, whatever the fetch options."""
    rng = random.Random(seed)
    body = _search_body(rng)
    index = rng.choice(["ints", "floats", "ints,floats"])
    params = {"search_type": "dfs_query_then_fetch"} if rng.random() < 0.3 else {}
    assert _response(node, index, body, params, _pickled(node)) == _response(node, index, body, params), body


def test_a_page_of_several_shards_fetches_each_shard_once_at_once(node) -> None:
    """The fetch phase sends each shard of the page one message with its hits, never one per hit."""
    request = parse_search_request({"sort": [{"k": "asc"}, "_doc"], "size": 60}, {}, indices="ints,floats")
    targets = acquire_targets([node.indices["floats"], node.indices["ints"]])
    try:
        shards = [PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, targets)]
        hits, _ = phases.query_phase(node.search_services, targets, request, aggs=False, shards=shards)
        page = phases.fetch_page(
            node.search_services, hits, 0, len(hits), request, raw_hits=True, shards=shards
        )
        assert [shard.calls for shard in shards] == [{"query": 1, "fetch": 1}] * len(shards)
        ids = [hit["_id"] for hit in orjson.loads(page.data)]
        assert len(ids) == 60
        assert ids == [
            hit["_id"] for hit in phases.fetch_page(node.search_services, hits, 0, len(hits), request)
        ]
    finally:
        release_targets(targets)


def test_dfs_statistics_are_data_summed_by_the_coordinator(node) -> None:
    """Each shard answers its query's term statistics; their sum is every shard's statistics:
    the documents holding a term over both indices."""
    request = parse_search_request(
        {"query": {"match": {"t": "red"}}}, {"search_type": "dfs_query_then_fetch"}
    )
    targets = acquire_targets([node.indices["floats"], node.indices["ints"]])
    try:
        shards = [PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, targets)]
        parts = [shard.dfs(ShardDfs(request, i, 0)) for i, shard in enumerate(shards)]
        total = DfsStats.total(parts)
        holding = sum(t.searcher.doc_freq("t", "red") for t in targets)
        assert total.entries[("text_df", "t", "red")] == holding
        assert total.entries[("text_stats", "t")][0] == sum(t.searcher.text_stats("t")[0] for t in targets)
    finally:
        release_targets(targets)


def _shard_served(node, request, targets):
    """The request's query phase through pickled shard messages, as a search of shard actors
    runs it (top_hits.top_hits: rescoring, `terminate_after`, cursors and deep pages done by
    each shard)."""
    shards = [PickledShard(shard) for shard in top_hits.shard_handles(node.search_services, targets)]
    now = int(time.time() * 1000)
    return top_hits.top_hits(
        node.search_services, targets, request, now_millis=now, aggs=False, shards=shards
    )


def _every_match(node, request, targets):
    """The request's HitList of every match (rescored when it rescores), as a local walk has it."""
    now = int(time.time() * 1000)
    guard = SearchGuard(time.monotonic, None)
    hits = build_hitlist(targets, request, now_millis=now, with_aggs=None, guard=guard)
    return rescore(hits, request, now) if request.rescore else hits


def _answer(hits, request) -> tuple:
    start, end = page_bounds(hits, request)
    scores = None if hits.score is None else hits.score[start:end].tolist()
    return _page(hits, request), scores, hits.total, hits.terminated_early, hits.max_score


def _options_body(rng: random.Random) -> dict:
    """A search using one of the options a shard serves for shard actors: rescoring,
    `terminate_after`, a sort led by `_score` (or with `_score` after a field), a deep page."""
    query = rng.choice([{"match_all": {}}, {"match": {"t": " ".join(rng.sample(WORDS, 2))}}])
    body: dict = {"query": query, "from": rng.choice([0, 3]), "size": rng.choice([1, 5, 40])}
    option = rng.choice(["rescore", "terminate_after", "score_sort", "field_then_score"])
    if option == "rescore":
        body["rescore"] = [
            {
                "window_size": rng.choice([2, 10, 50]),
                "query": {
                    "rescore_query": {"match": {"t": rng.choice(WORDS)}},
                    "query_weight": rng.choice([0.5, 1.0]),
                    "rescore_query_weight": rng.choice([1.0, 3.0]),
                    "score_mode": rng.choice(["total", "multiply", "max", "min", "avg"]),
                },
            }
            for _ in range(rng.choice([1, 2]))
        ]
    elif option == "terminate_after":
        body["terminate_after"] = rng.choice([1, 7, 30, 1000])
        if rng.random() < 0.5:
            body["sort"] = [{rng.choice(["v", "k"]): rng.choice(["asc", "desc"])}]
    elif option == "score_sort":
        body["sort"] = [{"_score": rng.choice(["desc", "asc"])}] + [
            {field: rng.choice(["asc", "desc"])} for field in rng.sample(["v", "k"], rng.choice([1, 2]))
        ]
    else:
        body["sort"] = [{rng.choice(["v", "k"]): rng.choice(["asc", "desc"])}, "_score"]
    return body


@pytest.mark.parametrize("seed", range(80))
def test_options_served_by_the_shards_equal_the_hitlist_page(node, seed: int) -> None:
    """What a search of shard actors gets from its shards (each shard rescores its own top
    window, stops at `terminate_after`, compares its candidates with a `search_after` cursor on
    `_score` then fields before its top-k cut) is the page, scores, total and `terminated_early`
    the HitList of every match (the local path) gives for the same request: also from a cursor anywhere in the
    order (the sort values of a hit, as a client sends them back)."""
    rng = random.Random(seed)
    body = _options_body(rng)
    index = rng.choice(["ints", "floats", "ints,floats"])
    params = {"search_type": "dfs_query_then_fetch"} if rng.random() < 0.3 else {}
    request = parse_search_request(body, params, indices=index)
    targets = phases.resolve_targets(node.search_services, request)
    try:
        local = _every_match(node, request, targets)
        assert _answer(_shard_served(node, request, targets), request) == _answer(local, request), body
        if "sort" in body and len(local) > 1 and "terminate_after" not in body:
            at = rng.randrange(1, len(local))
            cursor = orjson.loads(orjson.dumps(last_sort_values(local, at)))
            after = parse_search_request({**body, "from": 0, "search_after": cursor}, params, indices=index)
            local_after = _every_match(node, after, targets)
            served = _shard_served(node, after, targets)
            assert _page(served, after) == _page(local_after, after), (body, cursor)
    finally:
        release_targets(targets)


def test_suggestions_through_pickled_shard_messages_answer_the_same(node) -> None:
    """The `suggest` phase is data too: each shard's part of a term suggestion (frequencies) and
    the coordinator's merge give the in-process answer, one message per shard."""
    body = {
        "size": 0,
        "suggest": {"t": {"text": "gren blue", "term": {"field": "t", "suggest_mode": "always"}}},
    }
    shards_seen: list[PickledShard] = []

    def pickled(targets):
        shards_seen.extend(_pickled(node)(targets))
        return shards_seen

    through = _response(node, "ints,floats", body, {}, pickled)
    assert through == _response(node, "ints,floats", body, {})
    assert [shard.calls.get("suggest") for shard in shards_seen] == [1] * 4
    (green,) = orjson.loads(through)["suggest"]["t"][0]["options"]
    assert green["text"] == "green" and green["freq"] > 0


@pytest.mark.parametrize("seed", range(40))
def test_a_machines_candidates_cut_to_its_best_merge_to_the_same_page(node, seed: int) -> None:
    """Shards rendering their candidates with their query (a small one-shot page over shard
    actors, `FetchAlong.candidates`), their answers pickled: each machine's (two of the four
    shards) cut to the best `from + size` of that machine's hits (`machine_candidates`) merge to
    the same page, hit for hit and byte for byte, as the answers uncut; ties (a keyword of three
    terms, documents without a value) included. The cut keeps at most `from + size` a machine."""
    body = _sorted_body(random.Random(seed), ["_score", {"k": "desc"}, {"v": "asc"}])
    request = parse_search_request(body, {})
    targets = acquire_targets([node.indices["floats"], node.indices["ints"]])
    try:
        now = int(time.time() * 1000)
        plan = top_hits.sort_plan(request, targets)
        types = tuple(top_hits.sort_field_types(spec, targets) for spec in plan.specs)
        along = FetchAlong(True, False, targets=len(targets), field_types=types, candidates=True)
        n = len(targets)
        # (the queries pickled together, as a phase's calls go: remote.send_calls)
        queries = pickle.loads(
            pickle.dumps(
                [ShardQuery(request, i, now, plan, False, shard_count=n, fetch=along) for i in range(n)]
            )
        )
        answered = [
            (
                q,
                pickle.loads(
                    pickle.dumps(query_and_fetch.run(top_hits.LocalShard(node.search_services, t, None), q))
                ),
            )
            for q, t in zip(queries, targets, strict=True)
        ]
        cut = [(q, pickle.loads(pickle.dumps(top))) for q, top in answered]
        k = request.from_ + request.size
        for machine in ([0, 2], [1, 3]):
            query_and_fetch.machine_candidates([cut[i] for i in machine])
            kept = sum(len(cut[i][1].docs) for i in machine)
            assert kept == min(k, sum(len(answered[i][1].docs) for i in machine)), body
        pages = []
        for answers in (answered, cut):
            tops = [top for _, top in answers]
            hits = top_hits.merge_top_docs(targets, request, plan, tops)
            start, end = page_bounds(hits, request)
            rendered = [
                tops[t].page.result.hits[tops[t].docs.tolist().index(d)]
                for t, d in zip(hits.target[start:end].tolist(), hits.doc[start:end].tolist(), strict=True)
            ]
            values = [c.values[start:end].tolist() for c in hits.columns]
            pages.append((_page(hits, request), rendered, values, hits.total))
        assert pages[1] == pages[0], body
    finally:
        release_targets(targets)
