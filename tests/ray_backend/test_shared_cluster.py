"""The Ray modules' shared cluster (tests/ray_cluster.py `SharedCluster`): what one module leaves
on it is gone before the next takes it, and a node a module removed is back; the machine actors of
a cluster of its full shape are kept for the next, holding nothing."""

from __future__ import annotations

from pathlib import Path

from tests import web
from tests.ray_cluster import (
    NODES,
    SharedCluster,
    alive_machines,
    leafsearch_actors,
    machine_resource,
    ray_server,
)


def test_what_a_module_leaves_is_gone_and_a_removed_node_is_back(shared_ray_cluster: SharedCluster) -> None:
    local = shared_ray_cluster.take()  # (first: it sets Ray's environment before Ray is imported)
    import ray
    from ray.experimental import internal_kv

    from leafsearch.ray_backend.actor import MACHINE_PREFIX
    from leafsearch.ray_backend.cluster import NAMESPACE
    from leafsearch.ray_backend.metadata import KV_NAMESPACE, MetadataClient

    try:
        # What a coordinator leaves: the metadata actor, an entry (as a user's), the secret (and
        # the machine actors an earlier module left, kept empty: the next test).
        metadata = MetadataClient(NAMESPACE)
        assert metadata.put("users", b"alice", None)[0]
        assert [name for name in leafsearch_actors() if not name.startswith(MACHINE_PREFIX)] == ["metadata"]
        leaving = sorted(local.cluster.worker_nodes, key=lambda node: node.node_id)[0]
        local.cluster.remove_node(leaving, allow_graceful=True)
        assert len(alive_machines()) == NODES - 1
    finally:
        shared_ray_cluster.give_back()
    again = shared_ray_cluster.take()
    try:
        assert again is local  # kept, not started anew
        assert leafsearch_actors() == []
        assert internal_kv._internal_kv_list("", namespace=KV_NAMESPACE) == []
        assert MetadataClient(NAMESPACE).get("users") == (0, None)  # a new actor, on nothing
        assert alive_machines() == [machine_resource(i) for i in range(NODES)]
        assert sorted(n["NodeID"] for n in ray.nodes() if n["Alive"]) == again.node_ids
        assert leaving.node_id not in again.node_ids
    finally:
        shared_ray_cluster.give_back()


def test_a_modules_machine_actors_are_kept_for_the_next_holding_nothing(
    shared_ray_cluster: SharedCluster, tmp_path: Path
) -> None:
    local = shared_ray_cluster.take()  # (first: it sets Ray's environment before Ray is imported)
    import ray
    from ray.experimental import internal_kv

    from leafsearch.ray_backend.actor import MACHINE_PREFIX
    from leafsearch.ray_backend.cluster import NAMESPACE
    from leafsearch.ray_backend.metadata import KV_NAMESPACE, SECRET_KEY, MetadataClient

    def machines() -> dict[str, object]:
        names = [name for name in leafsearch_actors() if name.startswith(MACHINE_PREFIX)]
        return {name: ray.get_actor(name, namespace=NAMESPACE) for name in names}

    first = tmp_path / "first"
    try:
        # What a module leaves: shards with documents and an open point in time on every machine.
        with (
            ray_server(local.address, first) as server,
            web.Client(base_url=server.url, timeout=60) as http,
        ):
            settings = {"number_of_shards": 6, "number_of_replicas": 0}
            assert http.put("/left", json={"settings": settings}).status_code == 200
            lines = "".join(f'{{"index":{{"_id":"{i}"}}}}\n{{"n":{i}}}\n' for i in range(60))
            bulk = http.post(
                "/left/_bulk?refresh=true", content=lines, headers={"content-type": "application/json"}
            )
            assert bulk.status_code == 200 and not bulk.json()["errors"]
            assert http.post("/left/_pit?keep_alive=5m").status_code == 200
            assert (
                http.put(
                    "/_cluster/settings", json={"persistent": {"search.max_keep_alive": "1h"}}
                ).status_code
                == 200
            )
        left = machines()
        assert len(left) == NODES and all(ray.get(m.held.remote(), timeout=60) for m in left.values())
        pids = {name: ray.get(m.where.remote(), timeout=60)[1] for name, m in left.items()}
        assert list(first.rglob("index_state.json"))
    finally:
        shared_ray_cluster.give_back()
    again = shared_ray_cluster.take()
    try:
        assert again is local
        kept = machines()
        assert sorted(leafsearch_actors()) == sorted(left)  # the metadata actor ended
        assert {name: ray.get(m.where.remote(), timeout=60)[1] for name, m in kept.items()} == pids
        for machine in kept.values():
            assert ray.get(machine.held.remote(), timeout=60) == []
            assert ray.get(machine.stats.remote(), timeout=60)["shards"] == 0
        assert not list(first.rglob("index_state.json"))  # each shard's folder deleted
        assert internal_kv._internal_kv_list("", namespace=KV_NAMESPACE) == [SECRET_KEY.encode()]
        assert MetadataClient(NAMESPACE).get("cluster_settings") == (0, None)  # a new actor, on nothing
        # A new coordinator on the kept machines: the index's name is free, its shards served.
        with (
            ray_server(local.address, tmp_path / "second") as server,
            web.Client(base_url=server.url) as http,
        ):
            assert http.get("/_cat/indices", params={"format": "json"}).json() == []
            assert (
                http.put("/left", json={"settings": {"number_of_shards": 6}}, timeout=60).status_code == 200
            )
            assert http.put("/left/_doc/1?refresh=true", json={"n": 1}, timeout=60).status_code == 201
            assert http.get("/left/_count", timeout=60).json()["count"] == 1
    finally:
        shared_ray_cluster.give_back()
