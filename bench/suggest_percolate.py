"""Completion suggestions and percolation over HTTP:
`python -m bench.suggest_percolate [--docs 50000] [--queries 5000] [--runs 30]`.

Starts `leafsearch serve` on a temporary folder and indexes `--docs` documents with a
`completion` field (two inputs each, two or three random words of a 20,000-word vocabulary, random
weights, a category context of 10 values) and `--queries` documents with a `percolator` field (a
`match` on a word, or a `bool` of a `term` and a `range`), in `_bulk` of 1,000 from one client.
Then times, one request after the other, `--runs` distinct requests of each kind: completion
suggestions for 1-, 2- and 3-letter prefixes, a fuzzy one, one with a context, and a `percolate`
of one document. Prints indexing documents per second and each kind's p50 and p99 in ms."""

from __future__ import annotations

import argparse
import random
import time

import httpx
import orjson

from leafsearch.testing import Server

CHUNK = 1000
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _word(rng: random.Random) -> str:
    return "".join(rng.choice(LETTERS) for _ in range(rng.randint(3, 9)))


def _percentiles(took: list[float]) -> str:
    ordered = sorted(took)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000
    return f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.suggest_percolate", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--docs", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    rng = random.Random(0)
    vocabulary = list({_word(rng) for _ in range(20_000)})
    mapping = {
        "properties": {
            "s": {"type": "completion", "contexts": [{"name": "c", "type": "category"}]},
            "query": {"type": "percolator"},
            "msg": {"type": "text"},
            "tag": {"type": "keyword"},
            "n": {"type": "long"},
        }
    }
    docs = [
        {
            "s": [
                {
                    "input": " ".join(rng.sample(vocabulary, rng.randint(2, 3))),
                    "weight": rng.randrange(1_000_000),
                    "contexts": {"c": [f"c{rng.randrange(10)}"]},
                }
                for _ in range(2)
            ]
        }
        for _ in range(args.docs)
    ]
    stored = [
        {"query": {"match": {"msg": rng.choice(vocabulary)}}}
        if i % 2
        else {
            "query": {
                "bool": {
                    "must": [
                        {"term": {"tag": f"t{rng.randrange(100)}"}},
                        {"range": {"n": {"gte": rng.randrange(1000)}}},
                    ]
                }
            }
        }
        for i in range(args.queries)
    ]
    ndjson = {"content-type": "application/x-ndjson"}
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        assert http.put("/b", json={"mappings": mapping}).status_code == 200
        everything = docs + stored
        began = time.perf_counter()
        for start in range(0, len(everything), CHUNK):
            body = b"".join(
                orjson.dumps({"index": {}}) + b"\n" + orjson.dumps(doc) + b"\n"
                for doc in everything[start : start + CHUNK]
            )
            response = http.post("/b/_bulk", content=body, headers=ndjson)
            assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
        http.post("/b/_refresh")
        rate = len(everything) / (time.perf_counter() - began)
        print(f"indexing: {rate:,.0f} docs/s ({len(everything):,} docs)")
        kinds = {
            "completion, 1-letter prefix": lambda i: {"prefix": LETTERS[i % 26]},
            "completion, 2-letter prefix": lambda i: {"prefix": LETTERS[i % 26] + LETTERS[(i * 7) % 26]},
            "completion, 3-letter prefix": lambda i: {"prefix": vocabulary[i][:3]},
            "completion, fuzzy (5 letters)": lambda i: {"prefix": vocabulary[i][:5], "fuzzy": {}},
            "completion, a context": lambda i: {"prefix": LETTERS[i % 26], "contexts": {"c": f"c{i % 10}"}},
        }
        for name, options in kinds.items():
            took = []
            for i in range(args.runs):
                given = options(i)
                suggestion = {"prefix": given.pop("prefix"), "completion": {"field": "s", **given}}
                began = time.perf_counter()
                response = http.post("/b/_search", json={"size": 0, "suggest": {"x": suggestion}})
                took.append(time.perf_counter() - began)
                assert response.status_code == 200, response.text[:500]
            print(f"{name}: {_percentiles(took)}")
        took = []
        for i in range(args.runs):
            document = {"msg": " ".join(rng.sample(vocabulary, 12)), "tag": f"t{i}", "n": 500 + i}
            began = time.perf_counter()
            response = http.post(
                "/b/_search", json={"query": {"percolate": {"field": "query", "document": document}}}
            )
            took.append(time.perf_counter() - began)
            assert response.status_code == 200, response.text[:500]
        print(f"percolate of one document over {args.queries:,} stored queries: {_percentiles(took)}")


if __name__ == "__main__":
    main()
