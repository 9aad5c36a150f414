"""Points in time and scrolls on a Ray-backed index survive `kill -9` of the coordinator (`serve
--ray`, restarted on the same data folder and cluster) and of a shard actor (restarted by Ray):
the same ids go on with the same pages, every document of the snapshot exactly once with its
`_source` as it was at opening, while a writer updates, deletes, adds and refreshes beside.

As tests/node/test_durable_contexts.py for a single node (its writer and walk helpers), on a local
3-node Ray cluster (one for the module). Seeds are in the assertion messages.
"""

from __future__ import annotations

import base64
import os
import random
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import Elasticsearch, NotFoundError

from leafsearch.testing import Server
from tests.node.test_durable_contexts import MAPPING, PAGE, SLICES, Writer, fill, kill_9, pit_page
from tests.ray_backend.test_ray_backend import restarted
from tests.ray_cluster import COORDINATOR_STARTUP_SECONDS, LOOPBACK_ENV, machine_actor, shard_actor, where
from tests.server_zygote import SERVER_ZYGOTE

SETTINGS = {"number_of_shards": 3, "number_of_replicas": 0, "refresh_interval": "50ms"}


def coordinator(address: str, data: Path) -> Server:
    return Server(
        data,
        args=["--ray", address],
        env=LOOPBACK_ENV,
        startup_timeout=COORDINATOR_STARTUP_SECONDS,
        popen=SERVER_ZYGOTE.popen,
    ).start()


def uuid_of(es: Elasticsearch, index: str) -> str:
    return es.indices.get_settings(index=index).body[index]["settings"]["index"]["uuid"]


def kill_coordinator(servers: list[Server], uuid: str, rng: random.Random) -> str:
    kill_9(servers[-1])
    servers.append(coordinator(servers[-1].args[1], servers[-1].data))
    return "coordinator"


def kill_actor(servers: list[Server], uuid: str, rng: random.Random) -> str:
    """kill -9 of the process of a shard's machine actor, or `ray.kill` (restart allowed), at random."""
    import ray

    shard = rng.randrange(SETTINGS["number_of_shards"])
    pid = where(uuid, shard)[1]
    if rng.random() < 0.5:
        os.kill(pid, signal.SIGKILL)
        how = "kill -9"
    else:
        ray.kill(machine_actor(uuid, shard), no_restart=False)
        how = "ray.kill"
    restarted(uuid, shard, pid)
    return f"{how} of shard {shard}"


@pytest.mark.parametrize("kill", [kill_coordinator, kill_actor], ids=["coordinator", "actor"])
@pytest.mark.parametrize("trial", range(3))
def test_pit_walk_and_sliced_scroll_survive_kill_9_on_ray(
    ray_cluster: Any, tmp_path: Path, trial: int, kill: Callable[[list[Server], str, random.Random], str]
) -> None:
    seed = 2000 + trial + (100 if kill is kill_actor else 0)
    rng = random.Random(seed)
    writer = Writer("docs", seed)
    rounds = 600 // SLICES // PAGE + 2  # the walks take turns, a page each per round
    kills = sorted(rng.sample(range(1, rounds), 2))  # after which rounds something dies
    done_kills: list[str] = []
    pit_hits: list[dict[str, Any]] = []
    slice_hits: list[list[dict[str, Any]]] = [[] for _ in range(SLICES)]
    servers = [coordinator(ray_cluster.address, tmp_path / "data")]
    try:
        es = servers[-1].client()
        es.indices.create(index="docs", settings=SETTINGS, mappings=MAPPING)
        uuid = uuid_of(es, "docs")
        truth = fill(es, "docs")
        pit_id = es.open_point_in_time(index="docs", keep_alive="5m").body["id"]
        scroll_ids = []
        for i in range(SLICES):
            first = es.search(
                index="docs", scroll="5m", size=PAGE, slice={"id": i, "max": SLICES}, sort=["_doc"]
            ).body
            slice_hits[i] += first["hits"]["hits"]
            scroll_ids.append(first["_scroll_id"])
        writer.start(servers[-1].url)
        after: list | None = None
        pit_done = False
        done = [False] * SLICES
        turn = 0
        while not (pit_done and all(done)):
            if not pit_done:
                result = pit_page(es, pit_id, after)
                assert result["_shards"]["failed"] == 0, (
                    f"seed {seed} after {done_kills}: {result['_shards']}"
                )
                pit_id = result["pit_id"]
                pit_hits += result["hits"]["hits"]
                pit_done = len(result["hits"]["hits"]) < PAGE
                after = result["hits"]["hits"][-1]["sort"] if result["hits"]["hits"] else after
            for i in range(SLICES):
                if not done[i]:
                    batch = es.scroll(scroll_id=scroll_ids[i], scroll="5m").body
                    assert batch["_shards"]["failed"] == 0, (
                        f"seed {seed} after {done_kills}: {batch['_shards']}"
                    )
                    slice_hits[i] += batch["hits"]["hits"]
                    scroll_ids[i] = batch["_scroll_id"]
                    done[i] = not batch["hits"]["hits"]
            turn += 1
            if kills and turn >= kills[0]:
                kills.pop(0)
                writer.stop()
                done_kills.append(kill(servers, uuid, rng))
                es = servers[-1].client()
                writer.start(servers[-1].url)
        writer.stop()
        context = f"seed {seed}, {done_kills}"
        assert not kills and writer.ops > 0, context
        for walk in [pit_hits, *slice_hits]:
            ids = [hit["_id"] for hit in walk]
            assert len(ids) == len(set(ids)), f"{context}: a document came twice"
        assert sorted(h["_id"] for h in pit_hits) == sorted(truth), f"{context}: the PIT walk missed some"
        sliced = [hit for hits in slice_hits for hit in hits]
        assert sorted(h["_id"] for h in sliced) == sorted(truth), f"{context}: the slices missed some"
        for hit in pit_hits + sliced:
            assert hit["_source"] == truth[hit["_id"]], f"{context}: a source changed"
        # Ids stay unguessable: the same id with another token is unknown, after the restarts too.
        raw = base64.urlsafe_b64decode(pit_id + "=" * (-len(pit_id) % 4))
        forged = base64.urlsafe_b64encode(raw[:-32] + b"0" * 32).decode().rstrip("=")
        with pytest.raises(NotFoundError):
            es.search(pit={"id": forged}, size=1)
        assert es.close_point_in_time(id=pit_id).body["num_freed"] == 1
        assert es.clear_scroll(scroll_id=scroll_ids).body["num_freed"] == SLICES
        # Closing freed the actors' pins, in memory and on disk.
        import ray

        stats = [shard_actor(uuid, s).stats.remote() for s in range(SETTINGS["number_of_shards"])]
        assert [s["open_contexts"] for s in ray.get(stats, timeout=60)] == [0, 0, 0], context
        assert not list((tmp_path / "data" / "ray-shards").glob("*/*/*/shard/pins/*.npz")), context
        es.indices.delete(index="docs")
    finally:
        writer.stop()
        for running in servers:
            running.stop()


def pin_files(data: Path) -> list[Path]:
    """The pins the shard actors of the coordinator on `data` keep on disk (one per context and shard)."""
    return list((data / "ray-shards").glob("*/*/*/shard/pins/*.npz"))


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Poll `condition` until it holds (the reaper's work is asynchronous), failing after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {seconds} s"
        time.sleep(0.1)


def test_expiry_after_a_restart_and_closing_the_index_free_the_actors_pins(
    ray_cluster: Any, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    servers = [coordinator(ray_cluster.address, data)]
    try:
        es = servers[-1].client()
        es.indices.create(index="pins", settings=SETTINGS, mappings=MAPPING)
        fill(es, "pins")
        short = es.open_point_in_time(index="pins", keep_alive="3s").body["id"]
        long = es.open_point_in_time(index="pins", keep_alive="5m").body["id"]
        assert len(pin_files(data)) == 2 * SETTINGS["number_of_shards"]
        held = es.indices.stats(index="pins", metric="store").body["_all"]["primaries"]["store"]
        assert held["contexts_size_in_bytes"] > 0  # the pin files, on the actors' disks
        kill_9(servers[-1])
        servers.append(coordinator(ray_cluster.address, data))
        es = servers[-1].client()
        # Both restored, with their whole keep-alive from the restart; the short one then expires
        # (the reaper frees it on the actors) and its id says so.
        assert es.search(pit={"id": long}, size=0).body["hits"]["total"]["value"] == 600
        wait_for(lambda: len(pin_files(data)) == SETTINGS["number_of_shards"], "the expired PIT's pins going")
        with pytest.raises(NotFoundError, match="expired"):
            es.search(pit={"id": short}, size=0)
        # Closing the index frees its PITs while its actors are gone: their pins go once it is
        # open again (the reaper frees them through the new actors).
        es.indices.close(index="pins")
        assert len(pin_files(data)) == SETTINGS["number_of_shards"]
        es.indices.open(index="pins")
        wait_for(lambda: not pin_files(data), "the closed index's PIT pins going")
        with pytest.raises(NotFoundError, match="closed"):
            es.search(pit={"id": long}, size=0)
        es.indices.delete(index="pins")
    finally:
        for running in servers:
            running.stop()


def test_a_restored_pit_stays_its_openers(ray_cluster: Any, tmp_path: Path) -> None:
    from tests.security_helpers import add_user

    data = tmp_path / "data"
    for name, role in (("admin", "superuser"), ("ann", "viewer"), ("bob", "viewer")):
        add_user(data, name, f"{name}-secret", role)
    servers = [coordinator(ray_cluster.address, data)]
    try:
        admin = servers[-1].client(basic_auth=("admin", "admin-secret"))
        admin.indices.create(index="owned", settings=SETTINGS, mappings=MAPPING)
        fill(admin, "owned")
        pit = (
            servers[-1]
            .client(basic_auth=("ann", "ann-secret"))
            .open_point_in_time(index="owned", keep_alive="5m")["id"]
        )
        kill_9(servers[-1])
        servers.append(coordinator(ray_cluster.address, data))
        ann = servers[-1].client(basic_auth=("ann", "ann-secret"))
        bob = servers[-1].client(basic_auth=("bob", "bob-secret"))
        with pytest.raises(NotFoundError):
            bob.search(pit={"id": pit}, size=1)
        assert bob.options(ignore_status=404).close_point_in_time(id=pit).body.get("num_freed", 0) == 0
        assert ann.search(pit={"id": pit}, size=0)["hits"]["total"]["value"] == 600
        assert ann.close_point_in_time(id=pit)["num_freed"] == 1
        admin = servers[-1].client(basic_auth=("admin", "admin-secret"))
        admin.indices.delete(index="owned")
    finally:
        for running in servers:
            running.stop()
