"""The Ray modules' shared cluster (tests/ray_cluster.py `SharedCluster`): what one module leaves
on it is gone before the next takes it, and a node a module removed is back."""

from __future__ import annotations

from tests.ray_cluster import NODES, SharedCluster, alive_machines, leafsearch_actors, machine_resource


def test_what_a_module_leaves_is_gone_and_a_removed_node_is_back(shared_ray_cluster: SharedCluster) -> None:
    local = shared_ray_cluster.take()  # (first: it sets Ray's environment before Ray is imported)
    import ray
    from ray.experimental import internal_kv

    from leafsearch.ray_backend.cluster import NAMESPACE
    from leafsearch.ray_backend.metadata import KV_NAMESPACE, MetadataClient

    try:
        # What a coordinator leaves: the metadata actor, an entry (as a user's), the secret.
        metadata = MetadataClient(NAMESPACE)
        assert metadata.put("users", b"alice", None)[0]
        assert leafsearch_actors() == ["metadata"]
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
