"""The suite's paging, scroll, PIT, slicing and durability tests, run again against a Ray-backed
node (issue 10: "every REST feature works unchanged against a Ray-backed node").

How: each module here imports a module of `tests/` whole (`from test_scroll import *`), so
pytest collects its tests (and its fixtures) a second time, under `tests/ray_backend/suite/`; the tests'
text is the one in `tests/`, and the local run of `tests/` is unchanged. What the tests reach the
server through is replaced for this folder:

- `server` is the URL of a coordinator started with `--ray <address>` on a local 3-node Ray
  cluster (tests/ray_cluster.py); `http` and `es` are clients of it. One cluster (the worker's
  shared one, as the other Ray modules': tests/conftest.py `ray_cluster`) and one coordinator
  serve the whole folder (package scope): the coordinator started before its first test and
  stopped after its last, the cluster reset then.
- `new_index` creates its index with `RAY_SHARDS` shards when the test does not fix the number
  (but for the tests of `ONE_SHARD`, which rely on Elasticsearch's default of one), so that
  pages, walks and slices cross several actors on different Ray nodes.
- `clocked` (an in-process node on a fake clock) is a `Node(ray=...)` coordinating actors on the
  same cluster: the reader contexts and their keep-alives are the coordinator's; likewise the
  property module's `node` (test_pit_property.py here).
- In a module that starts servers of its own (`running_server`: the durability tests), those are
  Ray coordinators on the same cluster, each on its own data folder, and the module's `kill_9`
  kills the coordinator and then every machine actor holding a shard of that folder with
  SIGKILL: Ray restarts the actors, which recover their shards from their folders, so "every
  acknowledged write is found after" is checked through both crashes. `_translog_bytes` (when
  to kill in the middle of a bulk) reads the shards' translogs.

Tests that cannot run on Ray are deselected by name in `DESELECTED` below, each with its reason:
features not built for Ray yet, ones refused on Ray by design, and tests of the local node's
internals. The whole folder takes far longer than a local run (every shard of every index a test
creates is opened on a machine actor), so CI runs the tests of `IN_CI`, chosen to cover every feature;
`LEAFSEARCH_RAY_SUITE=all` runs them all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import pytest
from elasticsearch import Elasticsearch

from tests import web
from tests.conftest import ClockedNode, creating_indices, serving_clocked
from tests.ray_cluster import (
    COORDINATOR_STARTUP_SECONDS,
    LocalCluster,
    SharedCluster,
    machine_actor,
    ray_server,
)

#: Shards of an index a test creates with `new_index` without fixing their number: one for each
#: of the cluster's nodes, so every walk crosses three actors on three Ray nodes.
RAY_SHARDS = 3

_PIT_SLICES = (
    "by design on Ray: a PIT's slices go to shards first (issue 10, SPEC 4.2, as Elasticsearch's "
    "sliced PIT), then ranges within a shard, so they are not one contiguous `_shard_doc` range "
    "each, nor even when routing skews the shards, which this test asserts of the local node"
)
_NO_SERVER = "runs in-process without a server or a node's shards: nothing of it differs on Ray"

#: Tests of `tests/<module>` never run here: {module: {test name (without parameters): reason}}.
DESELECTED: dict[str, dict[str, str]] = {
    "test_slices.py": {
        "test_segment_id_hashes_equal_elasticsearch_definition": _NO_SERVER,
        "test_segment_id_hashes_in_chunks": _NO_SERVER,
        "test_a_segment_is_hashed_once_for_every_request_on_it": (
            "counts the hashing of a segment in the test's own process; a shard actor hashes its "
            "segments in its own process"
        ),
    },
    "test_pit.py": dict.fromkeys(
        (
            "test_slices_partition_the_walk",
            "test_slices_come_out_even_when_routing_skews_the_shards",
            "test_track_total_hits_false_walk_equals_the_counted_walk",
        ),
        _PIT_SLICES,
    ),
    "test_pit_property.py": {
        "test_a_pit_holds_its_segments_until_it_ends": (
            "reads the segment folders and hit lists of the node's own shards; a shard actor's "
            "snapshots live in the actor (test_ray_backend.py checks that contexts free them)"
        ),
    },
    "test_search_before.py": {
        "test_a_backward_walk_is_the_forward_walk_reversed": (
            "walks an in-process node of its own (its pages in this process and in a search "
            "worker); the HTTP tests of the module walk backwards across the actors"
        ),
    },
    "test_collapse.py": {
        "test_the_keyword_global_ordinals_of_a_collapse_are_cached": (
            "counts the global ordinals of an in-process node of its own; a shard actor keeps its own"
        ),
        "test_the_request_breaker_counts_the_grouping": (
            "a shard actor's breakers are its own process's: the coordinator's cluster setting "
            "`indices.breaker.request.limit` does not reach them"
        ),
    },
    "test_durability.py": {
        "test_writes_acknowledged_before_a_merge_survive_a_crash_after_it": (
            "an in-process node that merges and kills its own process: no server and no Ray; a "
            "shard actor merges in the same engine code"
        ),
    },
}

#: Tests that rely on Elasticsearch's default of one shard per index (`new_index` keeps it).
ONE_SHARD = {"test_shard_doc_is_the_shard_index_and_the_doc_within_its_snapshot"}

#: What CI runs of this folder: per module, tests that cover each feature on Ray. The whole folder
#: takes about 18 minutes on two shared cores (every index a test creates starts one actor
#: process per shard), CI has about 2 for it. `LEAFSEARCH_RAY_SUITE=all` runs every test not in
#: `DESELECTED`.
IN_CI: dict[str, set[str]] = {
    "test_collapse.py": {
        "test_inner_hits_as_elasticsearch_has_them",
        "test_the_official_client_walks_collapsed_with_search_after",
        "test_a_collapsed_walk_beside_writers_groups_its_snapshot",
    },
    "test_collapse_rounds.py": {"test_a_pit_walk_with_inner_hits_of_both_shards"},
    "test_durability.py": {
        "test_updates_and_deletes_survive_kill_9_and_a_second_crash",
        "test_kill_9_in_the_middle_of_a_large_bulk_keeps_a_prefix_of_whole_documents",
    },
    "test_multishard.py": {
        "test_pages_over_five_shards_join_to_the_one_shard_order",
        "test_ties_break_the_same_way_on_every_request",
        "test_doc_order_over_shards",
    },
    "test_offset_paging.py": {
        "test_pages_follow_from_and_size",
        "test_total_hits_are_exact_up_to_ten_thousand",
    },
    "test_pit.py": {
        "test_the_pit_is_a_frozen_snapshot",
        "test_a_sorted_pit_search_gets_an_ascending_shard_doc_tiebreaker",
        "test_keep_alive_keeps_the_larger_retention_and_expiry_is_404",
        "test_shard_doc_is_the_shard_index_and_the_doc_within_its_snapshot",
        "test_dsl_iterate_walks_the_whole_index_and_closes_its_pit",
    },
    "test_opensearch_pit.py": {"test_create_search_list_and_delete"},
    "test_scroll.py": {
        "test_concurrent_writes_during_a_scan_never_appear",
        "test_sorted_scroll_keeps_its_order_across_batches",
    },
    "test_slices.py": {"test_slices_go_to_shards_first", "test_elasticsearch_sliced_scroll_yaml"},
    "test_search_before.py": {
        "test_a_page_without_a_pit_is_the_hits_just_before_the_cursor",
        "test_special_sorts_walk_backwards_on_a_pit",
    },
    "test_search_after.py": {
        "test_keyword_number_and_boolean_cursors",
        "test_null_is_the_cursor_of_a_missing_keyword",
        "test_score_cursors_walk_a_relevance_order",
    },
}

#: Property tests of modules not named `*_property.py`.
PROPERTIES = {"test_a_collapsed_walk_is_the_grouped_snapshot"}
#: Seconds the property tests may take here (each example's index starts its actors), over the
#: suite's 300.
PROPERTY_TIMEOUT = 1200


def runs_here(module: str, name: str) -> bool:
    """Whether this folder runs `name` of `tests/<module>` (see `DESELECTED` and `IN_CI`)."""
    if name in DESELECTED.get(module, {}):
        return False
    return os.environ.get("LEAFSEARCH_RAY_SUITE") == "all" or name in IN_CI.get(module, set())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    kept, dropped = [], []
    for item in items:
        path = Path(str(item.path))
        name = getattr(item, "originalname", item.name)
        if path.parent == here and not runs_here(path.name, name):
            dropped.append(item)
            continue
        if path.parent == here and (path.name.endswith("_property.py") or name in PROPERTIES):
            item.add_marker(pytest.mark.timeout(PROPERTY_TIMEOUT))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="package")
def ray_suite_cluster(shared_ray_cluster: SharedCluster) -> Iterator[LocalCluster]:
    """The worker's shared cluster (tests/conftest.py `ray_cluster`), held for the whole folder."""
    yield shared_ray_cluster.take()
    shared_ray_cluster.give_back()


@pytest.fixture(scope="package")
def server(ray_suite_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of the folder's Ray coordinator (its search workers are not used with `--ray`)."""
    with ray_server(ray_suite_cluster.address, tmp_path_factory.mktemp("ray-suite") / "data") as coordinator:
        yield coordinator.url


@pytest.fixture(scope="package")
def es(server: str) -> Iterator[Elasticsearch]:
    client = Elasticsearch(server, request_timeout=120)
    yield client
    client.close()


@pytest.fixture(scope="package")
def http(server: str) -> Iterator[httpx.Client]:
    with web.Client(base_url=server, timeout=120) as client:
        yield client


@pytest.fixture
def new_index(
    http: httpx.Client, index_name: str, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """`new_index` of tests/conftest.py, with `RAY_SHARDS` shards unless the test fixes them (or
    is one of `ONE_SHARD`)."""
    shards = 1 if request.node.originalname in ONE_SHARD else RAY_SHARDS
    with creating_indices(http, index_name, default_shards=shards) as create:
        yield create


def kill_shard_actors(data: Path) -> int:
    """SIGKILL every machine actor holding a shard of the coordinator on `data` (each keeps its
    shard under `<data>/ray-shards/<machine>/<index uuid>/<shard>`); Ray restarts each on its node.
    How many."""
    import ray

    pids = set()
    for folder in sorted(data.glob("ray-shards/*/*/*")):
        actor = machine_actor(folder.parent.name, int(folder.name))
        pids.add(ray.get(actor.where.remote(), timeout=COORDINATOR_STARTUP_SECONDS)[1])
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return len(pids)


def actor_translog_bytes(data: Path) -> int:
    """`_translog_bytes` of test_durability.py for the shards the actors keep under `data`."""
    total = 0
    for path in data.glob("ray-shards/*/*/*/shard/translog/*.tlog"):
        with suppress(FileNotFoundError):
            total += path.stat().st_size
    return total


@pytest.fixture(scope="module", autouse=True)
def servers_on_ray(request: pytest.FixtureRequest, ray_suite_cluster: LocalCluster) -> Iterator[None]:
    """In the module whose tests this one runs, `running_server` starts a Ray coordinator on the
    folder's cluster, and `kill_9` kills the coordinator and then every machine actor holding
    its shards."""
    source = sys.modules.get(request.module.__name__.rsplit(".", 1)[1])
    if source is None:  # (the folder run alone: `tests/<module>` was imported only by its path)
        tests = [f for name, f in vars(request.module).items() if name.startswith("test_") and callable(f)]
        source = sys.modules[tests[0].__module__]
    data_of: dict[int, Path] = {}

    @contextmanager
    def running_server(data: Path, *extra: str, **_: Any) -> Iterator[tuple[str, subprocess.Popen]]:
        assert not extra, "a Ray coordinator with options of a local server"
        with ray_server(ray_suite_cluster.address, data) as coordinator:
            assert coordinator.process is not None
            data_of[coordinator.process.pid] = data
            yield coordinator.url, coordinator.process

    def kill_9(process: subprocess.Popen) -> None:
        process.kill()
        process.wait()
        assert kill_shard_actors(data_of[process.pid]), "no machine actor to kill: the crash tests nothing"

    with pytest.MonkeyPatch.context() as patch:
        if hasattr(source, "running_server"):
            patch.setattr(source, "running_server", running_server)
        if hasattr(source, "kill_9"):
            patch.setattr(source, "kill_9", kill_9)
        if hasattr(source, "_translog_bytes"):
            patch.setattr(source, "_translog_bytes", actor_translog_bytes)
        yield


@pytest.fixture
def clocked(tmp_path: Path, ray_suite_cluster: LocalCluster) -> Iterator[ClockedNode]:
    """`clocked` of tests/conftest.py with `ray=`: an in-process coordinator on a fake clock, its
    indices' shards actors on the folder's cluster (deleted with the test, ending the actors)."""
    with serving_clocked(tmp_path / "clocked", timeout=120, ray=ray_suite_cluster.address) as clocked:
        try:
            yield clocked
        finally:
            for name in list(clocked.node.indices):
                clocked.node.drop_index(name)
