"""The Ray backend (`serve --ray`) on 1, 2 and 3 local Ray nodes against the single-process
server, in one run, on the same data:

    python -m bench.ray_cluster                 # 200,000 documents, 6 shards
    python -m bench.ray_cluster --docs 1000000 --json ray.json
    python -m bench.ray_cluster --replicas --nodes 3   # bulk with replicas 1 against replicas 0

For each configuration the same documents are imported (2 parallel bulk clients, the index
created with 6 shards), then, from client processes:

- page latency: W6's queries (term on `service` + a random `@timestamp` range, sorted by time
  then id, first page of 100; every query distinct) by one client, after 10 warm-up queries
  from each of 4 clients: p50 and p99, and queries/s;
- a PIT walk (`_shard_doc`, `search_after`, pages of 1,000, no total): documents/s;
- a sliced export: one PIT read by 2 and by 3 client processes, one slice each (pages of
  1,000): documents/s. Every walk is checked: every document exactly once;
- on Ray, the calls the machine actors served (each counts them by method; one call carries a
  phase's messages to all the machine's shards): per W6 search (query, fetch, context
  releases), per PIT walk page and per page of the 3-slice export; and the metadata actor's
  (the cluster version each request asks, the context records read: `ctx_get`);
- searches that ask one shard (which query and fetch in one call on Ray): W6 on a one-shard
  copy of the index (`bench1`: latencies, queries/s, calls and coordinator CPU per search), and
  the PIT export in 6 slices, one per shard (documents/s, calls and CPU per page);
  `--one-shard-only` measures only these (with the import), for before/after runs of two trees;
- the import's CPU per 1,000 documents in the server (the coordinator, on Ray), in the processes
  below it (merge workers) and, on Ray, in the machine actors (their merges included), and
  their calls; `--import-only` measures only the import;
- the CPU the server process (the coordinator, on Ray) spent per W6 search and per 1,000
  documents of each walk, less what it spends idle (measured over 3 s before: Ray's threads in
  the coordinator are not idle), which the machine's load disturbs less than latencies; on Ray,
  the machine actors' CPU for the same work (their idle polling included);
- the load average (1 minute) at the end of each configuration: the machine is shared.

After each import the configuration's processes (the server and the processes below it; on Ray
the coordinator and the machine actors) are left to finish what the import started (refreshes,
flushes, merges) until they use less than `SETTLED_CPU` of a core for `SETTLED_WINDOWS` windows
of a second in a row (`settled after ..., s`: how long that took): else that work lands in
whichever measure follows, on either side, as much as the run's timing gives it.

The index has no replica (`number_of_replicas: 0`) but with `--replicas`, which measures only
the import (2 parallel bulk clients) on each Ray cluster size, into an index with replicas 1 and
one with replicas 0, in turns (0, 1, 0, 1: the machine's load shared alike), each copy of a
shard on another node.

The single-process server runs with `--search-workers 0` (every search in its process, as each
Ray configuration runs its searches in the shard actors). The local Ray cluster's nodes each get
one CPU and share this machine's cores, so what is measured is the cost per request and per
shard call, not the scaling of more machines; ARCHITECTURE.md ("Shards as Ray actors") says what
a larger cluster would do from these costs.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import orjson

from bench.client import Client
from bench.generate import MAPPING, generate, write_import_files
from bench.server import Server, _descendants
from bench.workers import _in_processes, _percentiles, _pit_walk, _queries, _query_client

SHARDS = 6
QUERIES = 150
WARM_UP = 10
IDLE_SECONDS = 3.0
#: A configuration is settled when its processes use less than this share of a core ...
SETTLED_CPU = 0.15
#: ... for this many windows of a second in a row (`_settle`).
SETTLED_WINDOWS = 2
#: Seconds an import's after-work is waited for at most.
SETTLE_LIMIT_SECONDS = 600.0
#: Every Ray process on loopback (Ray otherwise takes the address of the machine's route out).
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def _slice_client(url: str, pit: str, slice_id: int, slices: int, start: Any) -> list[str]:
    """One client process reading one slice of a PIT: the ids it saw."""
    client = Client(url)
    body: dict[str, Any] = {
        "size": 1000,
        "pit": {"id": pit, "keep_alive": "1m"},
        "sort": ["_shard_doc"],
        "track_total_hits": False,
        "_source": False,
        "slice": {"id": slice_id, "max": slices},
    }
    start.wait()
    ids: list[str] = []
    while True:
        hits = client.json("POST", "/_search", body)["hits"]["hits"]
        if not hits:
            break
        ids += [hit["_id"] for hit in hits]
        body["search_after"] = hits[-1]["sort"]
    client.close()
    return ids


def _machine_actors() -> Iterator[Any]:
    """The machine actor of every alive machine that has one."""
    import ray

    from leafsearch.ray_backend.cluster import machine_of

    for machine in sorted({machine_of(node["Resources"]) for node in ray.nodes() if node["Alive"]}):
        try:
            yield ray.get_actor(f"machine/{machine}", namespace="leafsearch")
        except ValueError:  # no shard on that machine
            continue


#: The metadata actor's calls among `_machine_calls`' are named with this prefix.
METADATA = "metadata:"


def _machine_calls() -> Counter[str]:
    """The calls every machine actor served so far, by method, and the metadata actor's (each
    `METADATA` + its method: the bench process is connected to the Ray cluster; while a measure
    runs, only its searches call them)."""
    import ray

    calls: Counter[str] = Counter()
    for machine in _machine_actors():
        calls.update(ray.get(machine.stats.remote(), timeout=60)["calls"])
    metadata = ray.get_actor("metadata", namespace="leafsearch")
    served = ray.get(metadata.stats.remote(), timeout=60)["calls"]
    calls.update({METADATA + method: count for method, count in served.items()})
    return calls


def _machine_only(calls: Counter[str]) -> int:
    return sum(count for method, count in calls.items() if not method.startswith(METADATA))


def _machine_cpu() -> float:
    """CPU seconds the machine actors' processes (and the merge workers below them) used so far,
    their idle work included (each polls for its refreshes and merges)."""
    import ray

    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for machine in _machine_actors():
        for pid in _descendants(ray.get(machine.where.remote(), timeout=60)[1]):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # ended meanwhile
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _per(out: dict[str, Any], what: str, calls: Counter[str], count: int) -> None:
    """Calls per search or page, in all and by method; the metadata actor's in all and of its
    context records (`ctx_get`)."""
    out[f"{what}: machine calls"] = _machine_only(calls) / count
    for method in ("dfs", "query", "query_fetch", "relay", "fetch", "free_context", "open_context"):
        if calls[method]:
            out[f"{what}: {method} calls"] = calls[method] / count
    out[f"{what}: metadata calls"] = (sum(calls.values()) - _machine_only(calls)) / count
    out[f"{what}: metadata ctx_get calls"] = calls[METADATA + "ctx_get"] / count


def bench_files(work: Path, docs: int) -> tuple[Any, Path, Path]:
    """The bench's documents, their import file and the index's create body (`SHARDS` shards, no
    replica), written in `work`."""
    dataset = generate(docs)
    records, _ = write_import_files(dataset, work)
    create_body = work / "create.json"
    settings = {"number_of_shards": SHARDS, "number_of_replicas": 0}
    create_body.write_bytes(orjson.dumps({"settings": settings, "mappings": MAPPING}))
    return dataset, records, create_body


def _load(server: Server, records: Path, create_body: Path, index: str = "bench") -> float:
    """Import the documents; seconds taken."""
    began = time.perf_counter()
    command = [sys.executable, "-m", "leafsearch", "import", str(records), index, "--url", server.url]
    subprocess.run([*command, "--mapping", str(create_body), "--workers", "2", "--quiet"], check=True)
    Client(server.url).json("POST", f"/{index}/_refresh")
    return time.perf_counter() - began


def _settle(cpu: Callable[[], float]) -> float:
    """Wait until the processes whose CPU seconds so far `cpu` reads are settled (see the module's
    docstring); the seconds waited."""
    began = time.perf_counter()
    quiet = 0
    while quiet < SETTLED_WINDOWS and time.perf_counter() - began < SETTLE_LIMIT_SECONDS:
        before = cpu()
        time.sleep(1.0)
        quiet = quiet + 1 if cpu() - before < SETTLED_CPU else 0
    return time.perf_counter() - began


def _one_shard(
    server: Server,
    records: Path,
    create_body: Path,
    n: int,
    first: int,
    last: int,
    calls: Callable[[], Counter[str]] | None,
    manager: Any,
    pool: Any,
    idle: float,
    settled: Callable[[], float],
) -> dict[str, Any]:
    """The searches that ask one shard: W6 on `bench1`, a one-shard copy of the documents, and
    the 6-shard index's PIT exported in one slice per shard (see the module's docstring);
    `settled`: waits for the configuration to settle after the copy's import."""
    out: dict[str, Any] = {}
    one_shard = create_body.with_name("create1.json")
    one_shard.write_bytes(
        orjson.dumps({**orjson.loads(create_body.read_bytes()), "settings": {"number_of_shards": 1}})
    )
    _load(server, records, one_shard, "bench1")
    out["one shard import settled after, s"] = settled()
    queries = partial(_query_client, path="/bench1/_search")
    _in_processes(
        manager, pool, queries, [(server.url, _queries(first, last, 200 + c, WARM_UP)) for c in range(4)]
    )
    counted = calls or Counter
    before, cpu = counted(), server.cpu_seconds()[0]
    seconds, (latencies,) = _in_processes(
        manager, pool, queries, [(server.url, _queries(first, last, 2, QUERIES))]
    )
    spent = server.cpu_seconds()[0] - cpu - idle * seconds
    out["one shard W6 1 client, q/s"] = QUERIES / seconds
    out["one shard W6 p50, ms"], out["one shard W6 p99, ms"] = _percentiles(latencies)
    out["one shard W6 server CPU per search, ms"] = spent / QUERIES * 1000
    if calls:
        _per(out, "one shard W6 per search", counted() - before, QUERIES)
    client = Client(server.url)
    pit = client.json("POST", "/bench/_pit?keep_alive=1m")["id"]
    args = [(server.url, pit, s, SHARDS) for s in range(SHARDS)]
    counted = calls or Counter
    before, cpu = counted(), server.cpu_seconds()[0]
    seconds, id_lists = _in_processes(manager, pool, _slice_client, args)
    spent = server.cpu_seconds()[0] - cpu - idle * seconds
    client.raw("DELETE", "/_pit", orjson.dumps({"id": pit}))
    client.close()
    ids = sum(id_lists, [])
    if len(ids) != n or len(set(ids)) != n:
        raise RuntimeError(f"{SHARDS} slices: {len(ids)} hits, {len(set(ids))} distinct")
    pages = sum(math.ceil(len(found) / 1000) + 1 for found in id_lists)
    out[f"sliced export, {SHARDS} slices (one per shard), docs/s"] = n / seconds
    out[f"{SHARDS} slices server CPU per page, ms"] = spent / pages * 1000
    if calls:
        _per(out, f"{SHARDS} slices per page", counted() - before, pages)
    return out


def _measure(
    server: Server,
    records: Path,
    create_body: Path,
    n: int,
    first: int,
    last: int,
    calls: Callable[[], Counter[str]] | None = None,
    one_shard_only: bool = False,
    import_only: bool = False,
) -> dict[str, Any]:
    """The measurements of one configuration; `calls`: the machine actors' calls so far (Ray,
    whose machine actors' CPU is measured too); `one_shard_only`: the import and `_one_shard`'s
    only; `import_only`: the import alone."""
    machines = _machine_cpu if calls else float
    counted = calls or Counter
    before, (cpu, below), machine_cpu = counted(), server.cpu_seconds(), machines()
    out: dict[str, Any] = {"import, docs/s": n / _load(server, records, create_body)}
    after, after_below = server.cpu_seconds()
    out["import server CPU per 1,000 docs, ms"] = (after - cpu) / n * 1e6
    out["import server's workers CPU per 1,000 docs, ms"] = (after_below - below) / n * 1e6
    if calls:
        out["import machine actors CPU per 1,000 docs, ms"] = (machines() - machine_cpu) / n * 1e6
        out["import machine calls per 1,000 docs"] = _machine_only(counted() - before) / n * 1000
    if import_only:
        out["load average (1 min)"] = os.getloadavg()[0]
        return out
    settled = partial(_settle, lambda: sum(server.cpu_seconds()) + machines())
    out["import settled after, s"] = settled()
    context = multiprocessing.get_context("spawn")
    manager = context.Manager()
    with context.Pool(max(4, SHARDS)) as pool:
        warm = [(server.url, _queries(first, last, 100 + c, WARM_UP)) for c in range(4)]
        _in_processes(manager, pool, _query_client, warm)
        began = server.cpu_seconds()[0]
        time.sleep(IDLE_SECONDS)
        idle = (server.cpu_seconds()[0] - began) / IDLE_SECONDS
        out["server idle CPU, ms/s"] = idle * 1000
        out.update(
            _one_shard(server, records, create_body, n, first, last, calls, manager, pool, idle, settled)
        )
        if one_shard_only:
            manager.shutdown()
            out["load average (1 min)"] = os.getloadavg()[0]
            return out
        before, cpu, machine_cpu = counted(), server.cpu_seconds()[0], machines()
        seconds, (latencies,) = _in_processes(
            manager, pool, _query_client, [(server.url, _queries(first, last, 1, QUERIES))]
        )
        out["W6 1 client, q/s"] = QUERIES / seconds
        out["W6 p50, ms"], out["W6 p99, ms"] = _percentiles(latencies)
        spent = server.cpu_seconds()[0] - cpu - idle * seconds
        out["W6 server CPU per search, ms"] = spent / QUERIES * 1000
        if calls:
            out["W6 machine actors CPU per search, ms"] = (machines() - machine_cpu) / QUERIES * 1000
            _per(out, "W6 per search", counted() - before, QUERIES)
        before, cpu, machine_cpu = counted(), server.cpu_seconds()[0], machines()
        out["PIT walk, docs/s"] = _pit_walk(server.url, n)
        spent = server.cpu_seconds()[0] - cpu - idle * n / out["PIT walk, docs/s"]
        out["PIT walk server CPU per 1,000 docs, ms"] = spent / n * 1e6
        if calls:
            out["PIT walk machine actors CPU per 1,000 docs, ms"] = (machines() - machine_cpu) / n * 1e6
            _per(out, "PIT walk per page", counted() - before, math.ceil(n / 1000) + 1)
        for slices in (2, 3):
            client = Client(server.url)
            pit = client.json("POST", "/bench/_pit?keep_alive=1m")["id"]
            args = [(server.url, pit, s, slices) for s in range(slices)]
            before, cpu, machine_cpu = counted(), server.cpu_seconds()[0], machines()
            seconds, id_lists = _in_processes(manager, pool, _slice_client, args)
            spent = server.cpu_seconds()[0] - cpu - idle * seconds
            out[f"{slices} slices server CPU per 1,000 docs, ms"] = spent / n * 1e6
            if calls:
                used = machines() - machine_cpu
                out[f"{slices} slices machine actors CPU per 1,000 docs, ms"] = used / n * 1e6
            if calls and slices == 3:
                pages = sum(math.ceil(len(ids) / 1000) + 1 for ids in id_lists)
                _per(out, "3 slices per page", counted() - before, pages)
            client.raw("DELETE", "/_pit", orjson.dumps({"id": pit}))
            client.close()
            ids = sum(id_lists, [])
            if len(ids) != n or len(set(ids)) != n:
                raise RuntimeError(f"{slices} slices: {len(ids)} hits, {len(set(ids))} distinct")
            out[f"sliced export, {slices} slices, docs/s"] = n / seconds
    manager.shutdown()
    out["load average (1 min)"] = os.getloadavg()[0]
    return out


@contextmanager
def local_cluster(nodes: int) -> Iterator[Any]:
    """A local Ray cluster of `nodes` nodes, each a machine of its own (a resource
    `leafsearch-machine-m<i>`) with one CPU, all on 127.0.0.1 (else one machine, no replica
    placed), although they share this host; shut down after the block."""
    from ray.cluster_utils import Cluster

    node_args = {"num_cpus": 1, "object_store_memory": 80 * 1024 * 1024, "node_ip_address": "127.0.0.1"}
    head_args = {**node_args, "include_dashboard": False, "resources": {"leafsearch-machine-m0": 1}}
    cluster = Cluster(initialize_head=True, head_node_args=head_args)
    try:
        for i in range(1, nodes):
            cluster.add_node(**node_args, resources={f"leafsearch-machine-m{i}": 1})
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


@contextmanager
def ray_server(work: Path, name: str, address: str) -> Iterator[Server]:
    """`serve --ray address` in `work / name`, this process connected to the cluster too (the
    machine actors' calls and CPU are read through Ray); stopped after the block."""
    import ray

    server = Server(work / name, work / f"{name}.log", args=["--ray", address])
    try:
        server.start(timeout=120)
        ray.init(address=address, namespace="leafsearch", log_to_driver=False)
        yield server
    finally:
        server.stop()
        ray.shutdown()


def _ray_run(
    work: Path,
    nodes: int,
    records: Path,
    create_body: Path,
    n: int,
    first: int,
    last: int,
    one_shard_only: bool,
    import_only: bool,
) -> dict:
    began = time.perf_counter()
    with local_cluster(nodes) as cluster:
        started = time.perf_counter() - began
        with ray_server(work, f"ray{nodes}", cluster.address) as server:
            measured = _measure(
                server, records, create_body, n, first, last, _machine_calls, one_shard_only, import_only
            )
    return {"cluster start-up, s": started, **measured}


def _replicas_run(work: Path, nodes: int, records: Path, n: int) -> dict[str, Any]:
    """Import throughput into an index with replicas 1 and one with replicas 0, in turns."""
    with local_cluster(nodes) as cluster:
        return _replicas_turns(work, nodes, cluster.address, records, n)


def _replicas_turns(work: Path, nodes: int, address: str, records: Path, n: int) -> dict[str, Any]:
    server = Server(work / f"replicas{nodes}", work / f"replicas{nodes}.log", args=["--ray", address])
    rates: dict[int, list[float]] = {0: [], 1: []}
    try:
        server.start(timeout=120)
        for turn, replicas in enumerate((0, 1, 0, 1)):
            body = work / f"create-r{replicas}.json"
            settings = {"number_of_shards": SHARDS, "number_of_replicas": replicas}
            body.write_bytes(orjson.dumps({"settings": settings, "mappings": MAPPING}))
            rates[replicas].append(n / _load(server, records, body, index=f"bench{turn}"))
            health = Client(server.url).json(
                "GET", f"/_cluster/health/bench{turn}?wait_for_status=green&timeout=60s"
            )
            if health["status"] != "green":  # a replica not placed measures nothing
                raise RuntimeError(f"bench{turn}: {health}")
    finally:
        server.stop()
    out = {f"import replicas {r}, docs/s": sum(v) / len(v) for r, v in rates.items()}
    out["replicas 1 / replicas 0"] = out["import replicas 1, docs/s"] / out["import replicas 0, docs/s"]
    out["load average (1 min)"] = os.getloadavg()[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=200_000)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-single", action="store_true", help="skip the single-process server")
    parser.add_argument("--one-shard-only", action="store_true", help="only the searches that ask one shard")
    parser.add_argument("--replicas", action="store_true", help="only bulk, replicas 1 against replicas 0")
    parser.add_argument(
        "--import-only", action="store_true", help="only the import (CPU and calls per document)"
    )
    options = parser.parse_args()
    os.environ.update(LOOPBACK_ENV)  # before Ray is imported, and for the servers it starts
    work = Path(tempfile.mkdtemp(prefix="leafsearch-ray-"))
    results: dict[str, dict[str, Any]] = {}

    def keep(name: str, measured: dict[str, Any]) -> None:
        """A configuration's results, written at once: a long run cut short keeps what it did."""
        results[name] = measured
        if options.json:
            options.json.write_text(json.dumps({"docs": options.docs, "results": results}, indent=2))

    try:
        dataset, records, create_body = bench_files(work, options.docs)
        first, last = int(dataset.ts_ms.min()), int(dataset.ts_ms.max()) + 1
        for nodes in options.nodes if options.replicas else ():
            keep(f"ray {nodes} node(s)", _replicas_run(work, nodes, records, options.docs))
        if not options.no_single and not options.replicas:
            single = Server(work / "single", work / "single.log", args=["--search-workers", "0"])
            single.start()
            try:
                only = options.one_shard_only
                keep(
                    "single process",
                    _measure(
                        single,
                        records,
                        create_body,
                        options.docs,
                        first,
                        last,
                        None,
                        only,
                        options.import_only,
                    ),
                )
            finally:
                single.stop()
        for nodes in () if options.replicas else options.nodes:
            measured = _ray_run(
                work,
                nodes,
                records,
                create_body,
                options.docs,
                first,
                last,
                options.one_shard_only,
                options.import_only,
            )
            keep(f"ray {nodes} node(s)", measured)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    names = list(results)
    print(f"{options.docs:,} documents, {SHARDS} shards; same run, one client process per slice")
    keys = list(dict.fromkeys(key for values in results.values() for key in values))
    width = max(len(key) for key in keys)
    print(f"  {'':<{width}}" + "".join(f"{name:>18}" for name in names))
    for key in keys:
        row = "".join(f"{results[name].get(key, float('nan')):>18,.2f}" for name in names)
        print(f"  {key:<{width}}{row}")


if __name__ == "__main__":
    main()
