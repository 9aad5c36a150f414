"""What sharing the cluster's metadata costs a coordinator of a Ray cluster (`serve --ray`), on a
one-node local Ray cluster started here, with two in-process coordinators on it:

    python -m bench.ray_coordinators            # 2,000 documents, 2 shards

- per request, the check that applies other coordinators' changes (`Node.before_request`:
  the cluster version read from the GCS, nothing changed), against each way of asking: the
  GCS read alone and the metadata actor's `changes` call (what a request pays when the version
  moved): wall and CPU milliseconds of the coordinator's process, means of 300;
- a one-shard search's latency (p50 of 200, a `term` query) through the coordinator that created
  the index and through the other one;
- a PIT walk's pages (100 documents each) through one coordinator, and alternating between the
  two (each page then reads the context's record from the cluster and writes it back).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any


def timed(call: Callable[[], Any], rounds: int) -> tuple[float, float]:
    """Mean wall and CPU milliseconds of `call`, after 20 warm-up calls."""
    for _ in range(20):
        call()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        call()
    return (time.perf_counter() - wall) * 1000 / rounds, (time.process_time() - cpu) * 1000 / rounds


def p50(call: Callable[[], Any], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def walk(clients: list[Any], pit: str, docs: int) -> float:
    """Documents per second of a PIT walk whose pages go to `clients` in turn."""
    started, after, seen, turn = time.perf_counter(), None, 0, 0
    while True:
        body: dict[str, Any] = {"pit": {"id": pit, "keep_alive": "1m"}, "size": 100, "sort": ["_shard_doc"]}
        if after is not None:
            body["search_after"] = after
        hits = clients[turn % len(clients)].search(**body)["hits"]["hits"]
        turn += 1
        if not hits:
            break
        seen += len(hits)
        after = hits[-1]["sort"]
    assert seen == docs, (seen, docs)
    return seen / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=2000)
    args = parser.parse_args()
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray

    from leafsearch import Client, Node

    ray.init(address="local", namespace="leafsearch", include_dashboard=False, log_to_driver=False)
    folder = tempfile.mkdtemp(prefix="leafsearch-coordinators-")
    a = Client(node=Node(f"{folder}/a", ray="local"))
    b = Client(node=Node(f"{folder}/b", ray="local"))
    try:
        a.indices.create(index="bench", settings={"number_of_shards": 2, "number_of_replicas": 0})
        lines = b"".join(
            b'{"index":{"_id":"%d"}}\n{"n":%d,"k":"k%d"}\n' % (i, i, i % 10) for i in range(args.docs)
        )
        a.bulk(lines, index="bench", refresh="true")
        store = a.node.cluster_sync.store
        for name, call in (
            ("check before a request (nothing changed)", a.node.before_request),
            ("GCS read of the version", store.version),
            ("metadata actor's changes call", lambda: store.changes(0)),
        ):
            wall, cpu = timed(call, 300)
            print(f"{name}: {wall:.3f} ms wall, {cpu:.3f} ms CPU")
        for name, client in (("creator", a), ("other coordinator", b)):
            ms = p50(lambda c=client: c.search(index="bench", query={"term": {"k": "k3"}}, size=10), 200)
            print(f"term search through the {name}: p50 {ms:.2f} ms")
        for name, clients in (("one coordinator", [a]), ("both in turn", [a, b])):
            pit = a.open_point_in_time(index="bench", keep_alive="1m")["id"]
            print(f"PIT walk through {name}: {walk(clients, pit, args.docs):,.0f} docs/s")
            a.close_point_in_time(id=pit)
        a.indices.delete(index="bench")
    finally:
        a.node.close()
        b.node.close()
        ray.shutdown()


if __name__ == "__main__":
    main()
