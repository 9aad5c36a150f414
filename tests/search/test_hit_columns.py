"""Pages rendered column by column (the REST layer's bytes) are exactly the pages rendered hit by
hit (one dict per hit): same keys in the same order, same values, same bytes, for random pages of
random requests combining `version`, `seq_no_primary_term`, scores, `docvalue_fields` with and
without formats, custom routing and `stored_fields`, over indices of several segments each (one
keeping no source); and a `_doc` scroll's batches, sliced or not, as the executor renders them."""

from __future__ import annotations

import random
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson
import pytest

import leafsearch
from leafsearch.common.rawjson import RawJSON
from leafsearch.indices import admin
from leafsearch.request.search_request import parse_search_request
from leafsearch.rest.render import to_json
from leafsearch.search import execution, phases
from leafsearch.search.execution import ScrollTask
from leafsearch.search.fetch_phase import _rows_of, _sort_json, renders_raw
from leafsearch.search.guard import SearchGuard
from leafsearch.search.hit_columns import escapes, groups_of, json_items, json_scores
from leafsearch.search.hitlist import build_hitlist
from leafsearch.search.phases import fetch_page
from leafsearch.search.targets import acquire_targets, release_targets

MAPPINGS = {
    "alpha": {
        "properties": {
            "n": {"type": "long"},
            "x": {"type": "double"},
            "w": {"type": "float"},
            "h": {"type": "half_float"},
            "p": {"type": "scaled_float", "scaling_factor": 100},
            "k": {"type": "keyword"},
            "d": {"type": "date"},
            "dn": {"type": "date_nanos"},
            "b": {"type": "boolean"},
            "t": {"type": "text"},
        }
    },
    # The same names in another order and types, so that hits of the two indices differ.
    "beta": {
        "properties": {
            "k": {"type": "keyword"},
            "b": {"type": "boolean"},
            "n": {"type": "long"},
            "d": {"type": "date", "format": "yyyy/MM/dd HH:mm||epoch_millis"},
            "x": {"type": "float"},
            "t": {"type": "text"},
        }
    },
}
# An index keeping no source: its hits have none, beside hits that have theirs.
MAPPINGS["gamma"] = {"_source": {"enabled": False}, **MAPPINGS["alpha"]}
WORDS = ["red", "green", "blue", "black"]
KEYWORDS = ["a", "b,c", 'q"uote', "é", "zz", "back\\slash"]


def random_doc(rng: random.Random) -> dict[str, Any]:
    doc: dict[str, Any] = {"t": " ".join(rng.choices(WORDS, k=rng.randint(1, 4)))}
    maybe = {
        "n": lambda: (
            rng.randint(-(2**40), 2**40) if rng.random() < 0.8 else [rng.randint(0, 9) for _ in "ab"]
        ),
        "x": lambda: rng.uniform(-1e6, 1e6) if rng.random() < 0.8 else [rng.uniform(-1, 1), 1e-7],
        "w": lambda: rng.uniform(-10, 10),
        "h": lambda: rng.uniform(-100, 100),
        "p": lambda: round(rng.uniform(0, 500), 2),
        "k": lambda: rng.choice(KEYWORDS) if rng.random() < 0.8 else rng.sample(KEYWORDS, 3),
        "d": lambda: rng.randint(-(10**12), 4 * 10**12) if rng.random() < 0.9 else [0, 1_700_000_000_000],
        "dn": lambda: f"2024-01-0{rng.randint(1, 9)}T00:00:00.{rng.randint(0, 10**9 - 1):09d}Z",
        "b": lambda: rng.random() < 0.5,
    }
    for field, value in maybe.items():
        if rng.random() < 0.75:
            doc[field] = value()
    return doc


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory):
    """The node, and the custom routing of each routed document by (index, id)."""
    rng = random.Random(11)
    routed: dict[tuple[str, str], str] = {}
    with leafsearch.Node(tmp_path_factory.mktemp("cols") / "node", background=False) as node:
        for name, mapping in MAPPINGS.items():
            admin.create_index(node, name, {"settings": {"number_of_shards": 2}, "mappings": mapping})
            for batch in range(4):  # several segments per shard, updates and deletes among them
                ids = [f"{batch}-{i}" if rng.random() < 0.9 else f'{batch}-"{i}"' for i in range(50)]
                for doc_id in ids:
                    routing = rng.choice(["r1", "r,2", 'r"3']) if rng.random() < 0.2 else None
                    node.index_doc(name, doc_id, orjson.dumps(random_doc(rng)), routing=routing)
                    if routing is not None:
                        routed[(name, doc_id)] = routing
                for doc_id in rng.sample(ids, 10):
                    node.index_doc(
                        name, doc_id, orjson.dumps(random_doc(rng)), routing=routed.get((name, doc_id))
                    )
                node.indices[name].refresh()
                for doc_id in rng.sample(ids, 5):
                    node.delete_doc(name, doc_id, routing=routed.get((name, doc_id)))
            node.indices[name].refresh()
        yield node, routed


def random_request(rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {
        "query": rng.choice(
            [{"match_all": {}}, {"match": {"t": " ".join(rng.sample(WORDS, 2))}}, {"term": {"k": "a"}}]
        ),
        "size": rng.choice([1, 7, 60, 500]),
        "from": rng.choice([0, 0, 5]),
    }
    sort = rng.choice(
        [
            None,
            ["_score"],
            [{"n": "desc"}],
            [{"k": "asc"}, "_doc"],
            [{"d": {"order": "asc"}}],
            # several numeric columns, with missing values and floats
            [{"n": "desc"}, {"x": "asc"}, "_doc"],
            [{"d": "asc"}, {"w": "desc"}],
            [{"b": "asc"}, {"p": "desc"}, {"h": "asc"}],
            ["_score", {"n": "asc"}],
        ]
    )
    if sort is not None:
        body["sort"] = sort
    for option in ("version", "seq_no_primary_term", "track_scores"):
        if rng.random() < 0.5:
            body[option] = rng.random() < 0.8
    if rng.random() < 0.6:
        specs: list[Any] = []
        for _ in range(rng.randint(1, 4)):
            field = rng.choice(["n", "x", "w", "h", "p", "k", "d", "dn", "b", "missing"])
            spec: Any = field
            if field in ("d", "dn") and rng.random() < 0.5:
                spec = {
                    "field": field,
                    "format": rng.choice(["epoch_millis", "yyyy-MM-dd", "strict_date_time"]),
                }
            elif field in ("n", "x", "p") and rng.random() < 0.3:
                spec = {"field": field, "format": rng.choice(["0.00", "#,##0.#"])}
            specs.append(spec)
        body["docvalue_fields"] = specs
    stored = rng.random()
    if stored < 0.15:
        body["stored_fields"] = "_none_"
    elif stored < 0.3:
        body["stored_fields"] = ["_id"]
    elif rng.random() < 0.2:
        body["_source"] = False
    return body


def ordered(value: Any) -> Any:
    """A parsed JSON value with every object as its list of (key, value): equality then also
    compares key order."""
    if isinstance(value, dict):
        return [(key, ordered(child)) for key, child in value.items()]
    if isinstance(value, list):
        return [ordered(child) for child in value]
    return value


@pytest.mark.parametrize("seed", range(150))
def test_a_page_renders_the_same_by_columns_and_hit_by_hit(indexed, seed: int) -> None:
    node, routed = indexed
    rng = random.Random(seed)
    body = random_request(rng)
    indices = rng.choice([["alpha"], ["beta"], ["alpha", "beta"], ["gamma", "beta"]])
    request = parse_search_request(body, {})
    assert renders_raw(request)
    targets = acquire_targets([node.indices[name] for name in indices])
    try:
        hits = build_hitlist(
            targets,
            request,
            now_millis=int(time.time() * 1000),
            with_aggs=None,
            guard=SearchGuard(time.monotonic, None),
        )
        start = min(request.from_, len(hits))
        end = min(len(hits), start + request.size)
        by_columns = fetch_page(node, hits, start, end, request, raw_hits=True)
        by_hits = fetch_page(node, hits, start, end, request)
    finally:
        release_targets(targets)
    expected = to_json(by_hits)
    got = by_columns.data if isinstance(by_columns, RawJSON) else to_json(by_columns)
    assert ordered(orjson.loads(got)) == ordered(orjson.loads(expected)), body
    assert got == expected, body
    for hit in orjson.loads(got):  # routings are read for both renderers alike: check them apart
        if "_id" in hit:
            assert hit.get("_routing") == routed.get((hit["_index"], hit["_id"])), hit


def test_column_encoders_print_what_the_hit_renderer_prints() -> None:
    """Scores print in float32's shortest form inside and outside the range where orjson's float32
    printing agrees with Python's; strings holding commas or escapes keep their JSON."""
    rng = np.random.default_rng(5)
    scores = (10 ** rng.uniform(-12, 20, 5_000)).astype(np.float32)
    for chosen in (scores[(scores > 1e-5) & (scores < 1e13)], scores, np.array([0.0, -0.0, 1.5], np.float32)):
        want = [orjson.dumps(float(str(v))) for v in chosen]
        assert json_scores(chosen) == want
    texts = ["a", "b,c", 'q"', "é", ""]
    assert json_items(texts) == [orjson.dumps(t) for t in texts]
    assert json_items([1, -2, 2**63 - 1]) == [b"1", b"-2", b"9223372036854775807"]
    assert json_items([True, 1.5, float("inf")]) == [b"true", b"1.5", b"null"]


def test_a_page_with_per_hit_options_over_http(http, new_index) -> None:
    """Through the REST API, hits carry their options in Elasticsearch's key order, with the values
    their documents were written with: a routed document updated twice, a plain one, two segments."""
    index = new_index(mappings={"properties": {"n": {"type": "long"}, "k": {"type": "keyword"}}})
    http.put(f"/{index}/_doc/a?routing=r1&refresh=true", json={"n": 1, "k": ["y", "x"]})
    http.put(f"/{index}/_doc/b?refresh=true", json={"n": 2})
    for n in (3, 4):
        http.put(f"/{index}/_doc/a?routing=r1&refresh=true", json={"n": n, "k": "z"})
    body = {
        "sort": [{"n": "desc"}],
        "track_scores": True,
        "version": True,
        "seq_no_primary_term": True,
        "docvalue_fields": ["k", {"field": "n", "format": "0.0"}],
        "_source": False,
    }
    response = http.post(f"/{index}/_search", json=body)
    assert response.status_code == 200, response.text
    hits = orjson.loads(response.content)["hits"]["hits"]
    assert [ordered(hit) for hit in hits] == [
        ordered(
            {
                "_index": index,
                "_id": "a",
                "_version": 3,
                "_seq_no": 3,
                "_primary_term": 1,
                "_score": 1.0,
                "_routing": "r1",
                "fields": {"k": ["z"], "n": ["4.0"]},
                "sort": [4],
            }
        ),
        ordered(
            {
                "_index": index,
                "_id": "b",
                "_version": 1,
                "_seq_no": 1,
                "_primary_term": 1,
                "_score": 1.0,
                "fields": {"n": ["2.0"]},
                "sort": [2],
            }
        ),
    ]


def test_integer_sort_columns_print_from_their_arrays_what_their_values_print() -> None:
    """A sort column of integers as stored is encoded from its array (fetch_phase._sort_json),
    whatever the array's width, byte order or layout, beside a column of values and across the
    rows a shard takes of a page."""
    stored = np.array([0, -1, 7, 2**63 - 1, -(2**63), 1706609562085], dtype=np.int64)
    for column in (stored, stored.astype(">i8"), stored[::2], stored[:3].astype(np.int32), stored[:0]):
        assert _sort_json([column]) == _sort_json([column.tolist()])
    values = ["a", None, "b,c", "d", "e", "f"]
    assert _sort_json([stored, values]) == _sort_json([stored.tolist(), values])
    rows = np.array([5, 0, 3])
    taken = _rows_of([stored, values], rows)
    assert isinstance(taken[0], np.ndarray)
    assert _sort_json(taken) == _sort_json(_rows_of([stored.tolist(), values], rows))


def test_ids_spliced_as_they_are_only_when_json_would_not_escape_them() -> None:
    """`escapes` decides whether a page's ids go between quotes as stored: it must agree with a
    JSON encoder on every character an id may hold."""
    texts = [chr(c) for c in range(0x80)] + ["é", "日本", "a b", "\u2028", "x\x7fy", "plain-id_1"]
    for text in texts:
        encoded = text.encode()
        assert escapes(b"ab" + encoded + b"cd") == (orjson.dumps(text) != b'"' + encoded + b'"'), repr(text)


@pytest.mark.parametrize("seed", range(12))
def test_a_doc_scroll_batch_renders_the_same_by_columns_and_hit_by_hit(indexed, seed: int) -> None:
    """A `_doc` scroll's batches (live documents from the cursor, each batch one group of a
    segment or crossing segments and shards; a slice's too) rendered as the REST layer takes them
    are the bytes of the same batches rendered hit by hit, with random per-hit options; the walk
    reads every live document once."""
    node, _ = indexed
    rng = random.Random(seed)
    body: dict[str, Any] = {"sort": ["_doc"], "size": rng.choice([1, 13, 64, 250])}
    for option in ("version", "seq_no_primary_term"):
        if rng.random() < 0.5:
            body[option] = True
    if rng.random() < 0.4:
        body["docvalue_fields"] = rng.sample(["n", "k", "d", {"field": "x", "format": "0.00"}], 2)
    if rng.random() < 0.2:
        body["_source"] = False
    if rng.random() < 0.4:
        body["slice"] = {"id": rng.randrange(2), "max": 2}
    indices = rng.choice(["alpha", "beta", "alpha,beta", "gamma,alpha"])
    request = parse_search_request(body, {}, scroll="1m", indices=indices)
    services = node.search_services
    targets = phases.resolve_targets(services, request)
    live = sum(view.live_count for target in targets for view in target.searcher.views)
    seen: list[tuple[str, str]] = []
    try:
        cursor, total = None, None
        while True:
            batches = []
            for raw in (True, False):
                task = ScrollTask(targets, request, 0.0, raw, 1, "s", cursor, total, cursor is None, False)
                batches.append(execution.run(services, task))
            (by_columns, after, total, _), (by_hits, _, _, _) = batches
            got, expected = by_columns["hits"]["hits"], to_json(by_hits["hits"]["hits"])
            assert (got.data if isinstance(got, RawJSON) else to_json(got)) == expected, body
            hits = orjson.loads(expected)
            if not hits:
                break
            seen += [(hit["_index"], hit["_id"]) for hit in hits]
            cursor = after
    finally:
        release_targets(targets)
    assert len(seen) == len(set(seen)) and (
        len(seen) == live if "slice" not in body else 0 < len(seen) < live
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_page_splits_into_the_segment_views_holding_its_hits(seed: int) -> None:
    """`groups_of`: pages inside one segment, across segments and across targets, in any order:
    each hit is in the group of the view holding it, at its row, by its local doc, groups in
    (target, view) order; without target positions, every hit is the first target's."""
    rng = random.Random(seed)
    bases = [[0, 40, 45, 100], [0, 7]]
    targets = [
        SimpleNamespace(searcher=SimpleNamespace(views=[SimpleNamespace(doc_base=b) for b in views]))
        for views in bases
    ]
    for _ in range(200):
        n = rng.randint(1, 30)
        if rng.random() < 0.4:  # a walk's batch: consecutive docs of one target, often one segment
            first = rng.randint(0, 120)
            docs = list(range(first, first + n))
            tpos = [0] * n
        else:
            tpos = [rng.randint(0, 1) for _ in range(n)]
            docs = [rng.randint(0, 130) for _ in range(n)]
        positions = None if set(tpos) == {0} and rng.random() < 0.5 else np.array(tpos, np.int32)
        groups = groups_of(targets, positions, np.array(docs, np.int64))
        seen = []
        for group in groups:
            view_bases = bases[group.target]
            vi = [v.doc_base for v in targets[group.target].searcher.views].index(group.view.doc_base)
            for row, local in zip(group.rows.tolist(), group.local.tolist(), strict=True):
                assert tpos[row] == group.target
                doc = docs[row]
                assert local == doc - group.view.doc_base
                assert view_bases[vi] <= doc and (vi + 1 == len(view_bases) or doc < view_bases[vi + 1])
                seen.append(row)
        assert sorted(seen) == list(range(n))
        order = [(g.target, g.view.doc_base) for g in groups]
        assert order == sorted(order) and len(set(order)) == len(order)
