"""The query phase's shard interface: what crosses it is data, and merging the shards' top hits
gives exactly the page the full sort of every match gives, also when the indices of one search
map a sort field differently (long in one, double in another; keywords with different terms)."""

from __future__ import annotations

import pickle
import random
import time

import orjson
import pytest

import leafsearch
from leafsearch import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import top_hits
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hitlist import build_hitlist
from leafsearch.search.phases import page_bounds
from leafsearch.search.shard_api import ShardQuery
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
                    node.index_doc(name, f"{batch}-{i}", orjson.dumps(doc))
                node.indices[name].refresh()
        yield node


def _page(hits, request) -> list[tuple[int, int]]:
    start, end = page_bounds(hits, request)
    return list(zip(hits.target[start:end].tolist(), hits.doc[start:end].tolist(), strict=True))


@pytest.mark.parametrize("seed", range(60))
def test_shards_queried_through_pickled_requests_merge_to_the_full_sort_page(node, seed: int) -> None:
    """Every ShardQuery and ShardTopDocs goes through pickle (as to a shard in another process);
    the merged page equals the page of the full sort over both indices."""
    rng = random.Random(seed)
    field = rng.choice(["v", "k"])
    sort = [{field: {"order": rng.choice(["asc", "desc"]), "missing": rng.choice(["_first", "_last"])}}]
    if rng.random() < 0.5:
        sort.append({rng.choice(["v", "k"]): "asc"})
    query = rng.choice([{"match_all": {}}, {"match": {"t": rng.choice(WORDS)}}])
    body = {"query": query, "sort": sort, "from": rng.choice([0, 4]), "size": rng.choice([1, 7, 30])}
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
            result = top_hits.LocalShard(node, target, None).query(shard_query)
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
