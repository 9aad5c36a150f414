"""`geo_distance` query and `_geo_distance` sort over HTTP: `python -m bench.geo [--docs 1000000]
[--queries 30] [--km 50]`.

Starts `leafsearch serve` on a temporary folder and indexes `--docs` documents with `_bulk`
(5,000 a request, one client): a `geo_point` uniform over a box of Europe (35..60 N, -10..30 E)
and a `double` `r` uniform in [0, 1), and waits for the load's merges. Then times, one after the
other, `--queries` searches of each kind (size 10, a distinct center or bound each time, so no cache answers):
- `geo_distance` (`--km` around a random center) sorted by `_geo_distance` from that center;
- the same `geo_distance` query without a sort;
- a `range` on `r` selecting the same fraction of the documents the geo query selected on average;
- that `range` sorted by `r`.
Each answer is checked against numpy over the same points (count, and the nearest ids). Prints
indexing documents per second, the first geo search (which decodes each segment's points in the
worker it runs on), and each kind's p50 and p99 in milliseconds (the first geo search apart),
with the selectivity."""

from __future__ import annotations

import argparse
import math
import time
from types import SimpleNamespace

import httpx
import numpy as np
import orjson

from bench.workloads.common import settle_merges
from leafsearch.testing import Server

CHUNK = 5_000
R = 6_371_008.7714


def haversine(lat: float, lon: float, lats: np.ndarray, lons: np.ndarray) -> np.ndarray:
    p1, p2 = math.radians(lat), np.radians(lats)
    a = (
        np.sin((p2 - p1) / 2) ** 2
        + math.cos(p1) * np.cos(p2) * np.sin((np.radians(lons) - math.radians(lon)) / 2) ** 2
    )
    return 2 * R * np.arcsin(np.sqrt(a))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.geo", description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--km", type=float, default=50.0)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    lat = rng.uniform(35, 60, args.docs).round(6)
    lon = rng.uniform(-10, 30, args.docs).round(6)
    r = rng.uniform(0, 1, args.docs)
    mapping = {"properties": {"loc": {"type": "geo_point"}, "r": {"type": "double"}}}
    ndjson = {"content-type": "application/x-ndjson"}
    with Server() as server, httpx.Client(base_url=server.url, timeout=3600) as http:
        assert (
            http.put("/geo", json={"mappings": mapping, "settings": {"number_of_shards": 1}}).status_code
            == 200
        )
        began = time.perf_counter()
        for start in range(0, args.docs, CHUNK):
            body = b"".join(
                b'{"index":{"_id":"%d"}}\n' % i
                + orjson.dumps({"loc": f"{lat[i]},{lon[i]}", "r": float(r[i])})
                + b"\n"
                for i in range(start, min(start + CHUNK, args.docs))
            )
            response = http.post("/geo/_bulk", content=body, headers=ndjson)
            assert response.status_code == 200 and not response.json()["errors"], response.text[:500]
        http.post("/geo/_refresh")
        indexing = args.docs / (time.perf_counter() - began)
        calls = SimpleNamespace(
            json=lambda method, path: http.request(method, path).json(),
            raw=lambda method, path: http.request(method, path).content,
        )
        settle_merges(SimpleNamespace(http=calls), "geo")
        centers = np.stack([rng.uniform(38, 57, args.queries), rng.uniform(-7, 27, args.queries)], axis=1)
        took: dict[str, list[float]] = {"geo+sort": [], "geo": [], "range": [], "range+sort": []}
        matched = []

        def timed(kind: str, body: dict) -> dict:
            began = time.perf_counter()
            response = http.post("/geo/_search", json=body)
            took[kind].append((time.perf_counter() - began) * 1000)
            assert response.status_code == 200, response.text[:500]
            return response.json()

        for c_lat, c_lon in centers:
            query = {"geo_distance": {"distance": f"{args.km}km", "loc": {"lat": c_lat, "lon": c_lon}}}
            sort = [{"_geo_distance": {"loc": {"lat": c_lat, "lon": c_lon}, "order": "asc"}}]
            found = timed("geo+sort", {"query": query, "sort": sort, "size": 10, "_source": False})
            d = haversine(c_lat, c_lon, lat, lon)
            want = int((d <= args.km * 1000).sum())
            assert abs(found["hits"]["total"]["value"] - want) <= 2, (found["hits"]["total"], want)
            nearest = [int(h["_id"]) for h in found["hits"]["hits"]]
            assert np.allclose(d[nearest], np.sort(d)[: len(nearest)], rtol=1e-6, atol=0.05)
            timed("geo", {"query": query, "size": 10, "_source": False})
            matched.append(want)
        fraction = float(np.mean(matched)) / args.docs
        for lo in rng.uniform(0, 1 - fraction, args.queries):
            query = {"range": {"r": {"gte": lo, "lt": lo + fraction}}}
            found = timed("range", {"query": query, "size": 10, "_source": False})
            want = int(((r >= lo) & (r < lo + fraction)).sum())
            assert found["hits"]["total"]["value"] == want
            timed("range+sort", {"query": query, "sort": [{"r": "asc"}], "size": 10, "_source": False})
    print(f"docs={args.docs} indexing={indexing:,.0f} docs/s selectivity={fraction:.4%} ({args.km} km)")
    print(f"first geo+sort after the load (each segment's points decoded): {took['geo+sort'][0]:.1f} ms")
    for kind, values in took.items():
        ms = np.array(values[1:] if kind == "geo+sort" else values)
        print(f"{kind:>10}: p50={np.percentile(ms, 50):.1f} ms p99={np.percentile(ms, 99):.1f} ms")


if __name__ == "__main__":
    main()
