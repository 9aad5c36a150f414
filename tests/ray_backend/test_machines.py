"""What names a machine (ray_backend/cluster.py): the `leafsearch-machine-NAME` resource its Ray
node is started with, else the node's address; never its node id, which a restarted node changes.
The cluster's nodes as `ray.nodes()` lists them, without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ray_cluster import import_ray


def node(node_id: str, resources: dict[str, float], alive: bool = True) -> dict[str, Any]:
    return {"NodeID": node_id, "Alive": alive, "Resources": resources}


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    """A backend over `backend.nodes` (its `ray.nodes()`), connected to nothing."""
    ray = import_ray()
    from leafsearch.ray_backend import cluster
    from leafsearch.ray_backend.cluster import RayBackend

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(cluster, "cluster_secret", lambda: b"s" * 32)  # (kept in the cluster's store)
    made = RayBackend("auto", tmp_path / "shards")
    made.nodes = []
    monkeypatch.setattr(ray, "nodes", lambda: made.nodes)
    return made


def test_a_named_node_is_its_machine_and_a_restarted_one_the_same(backend: Any, tmp_path: Path) -> None:
    backend.nodes = [
        node("head1", {"node:10.0.0.1": 1, "node:__internal_head__": 1, "CPU": 4}),
        node("n2", {"node:10.0.0.2": 1, "leafsearch-machine-m1": 1, "CPU": 8}),
    ]
    assert backend.machines() == {"node:10.0.0.1": 4, "leafsearch-machine-m1": 8}
    placement = backend.place("uuid1", 4)
    assert (
        sorted(entry["node"] for entry in placement) == ["leafsearch-machine-m1"] * 2 + ["node:10.0.0.1"] * 2
    )
    root = tmp_path / "shards"
    for shard_id, entry in enumerate(placement):
        folder = "leafsearch-machine-m1" if entry["node"] == "leafsearch-machine-m1" else "node-10.0.0.1"
        assert entry["folder"] == str(root / folder / "uuid1" / str(shard_id))
    # Killed and started again: new node ids, another address for the named one, the same machines.
    backend.nodes = [
        node("head1", {"node:10.0.0.1": 1, "node:__internal_head__": 1, "CPU": 4}, alive=False),
        node("n2", {"node:10.0.0.2": 1, "leafsearch-machine-m1": 1, "CPU": 8}, alive=False),
        node("head2", {"node:10.0.0.1": 1, "node:__internal_head__": 1, "CPU": 4}),
        node("n3", {"node:10.0.0.7": 1, "leafsearch-machine-m1": 1, "CPU": 8}),
    ]
    assert backend.machines() == {"node:10.0.0.1": 4, "leafsearch-machine-m1": 8}


def test_nodes_of_one_host_without_names_are_one_machine(backend: Any) -> None:
    backend.nodes = [
        node("a", {"node:10.0.0.1": 1, "node:__internal_head__": 1, "CPU": 2}),
        node("b", {"node:10.0.0.1": 1, "CPU": 6}),
        node("c", {"node:10.0.0.1": 1, "leafsearch-machine-big": 1, "CPU": 16}),
        node("gone", {"node:10.0.0.9": 1, "leafsearch-machine-m5": 1}, alive=False),
    ]
    assert backend.machines() == {"node:10.0.0.1": 6, "leafsearch-machine-big": 16}
    assert {entry["node"] for entry in backend.place("uuid2", 6)} == set(backend.machines())


def test_machine_names_and_folders() -> None:
    import_ray()
    from leafsearch.ray_backend.cluster import machine_folder, machine_of

    assert machine_of({"leafsearch-machine-b": 1, "leafsearch-machine-a": 1, "node:1.2.3.4": 1}) == (
        "leafsearch-machine-a"
    )
    assert machine_of({"node:__internal_head__": 1, "node:fe80::1": 1, "CPU": 1}) == "node:fe80::1"
    assert machine_folder("node:fe80::1") == "node-fe80--1"
    assert machine_folder("leafsearch-machine-rack1.m_2") == "leafsearch-machine-rack1.m_2"
    assert machine_folder("leafsearch-machine-../x") == "leafsearch-machine-..-x"


def test_a_one_node_cluster_started_again_serves_every_acknowledged_write(tmp_path: Path) -> None:
    """`serve --ray local` stopped and started again: a new Ray node (a new id) of the same host,
    so the same machine, whose actor reopens every shard from the data folder."""
    import_ray()
    from tests.ray_cluster import ray_server

    data = tmp_path / "data"
    docs = {f"d{n}": {"n": n, "tag": f"t{n % 5}"} for n in range(300)}
    with ray_server("local", data) as server:
        es = server.client()
        es.indices.create(index="kept", settings={"number_of_shards": 3, "number_of_replicas": 0})
        operations: list[dict[str, Any]] = []
        for doc_id, source in docs.items():
            operations += [{"index": {"_index": "kept", "_id": doc_id}}, source]
        assert es.bulk(operations=operations).body["errors"] is False  # acknowledged, not refreshed
    with ray_server("local", data) as server:
        es = server.client()
        assert (
            es.cluster.health(index="kept", wait_for_status="green", timeout="60s").body["status"] == "green"
        )
        es.indices.refresh(index="kept")
        assert es.count(index="kept").body["count"] == len(docs)
        found = es.mget(index="kept", ids=sorted(docs)).body["docs"]
        assert {doc["_id"]: doc["_source"] for doc in found} == docs
        es.index(index="kept", id="later", document={"n": -1}, refresh=True)
        assert es.count(index="kept").body["count"] == len(docs) + 1


def test_a_shard_map_of_before_machines_were_named_still_finds_its_shards(backend: Any) -> None:
    """An index created when shards were placed by Ray node id: its node's machine while that
    node is alive; its node restarted (a new id), the cluster's machine when it has one alone."""
    old = [{"node": "n1", "folder": "/d/n1/u/0"}, {"node": "n2", "folder": "/d/n2/u/1"}]
    backend.nodes = [node("n1", {"node:10.0.0.1": 1, "CPU": 2}), node("n2", {"node:10.0.0.2": 1, "CPU": 2})]
    assert machines(backend.named(old)) == ["node:10.0.0.1", "node:10.0.0.2"]
    backend.nodes = [node("n3", {"node:10.0.0.1": 1, "CPU": 2})]
    assert machines(backend.named(old)) == ["node:10.0.0.1", "node:10.0.0.1"]
    backend.nodes = [node("n3", {"node:10.0.0.1": 1}), node("n4", {"node:10.0.0.2": 1})]
    assert machines(backend.named(old)) == ["leafsearch-machine-node-n1", "leafsearch-machine-node-n2"]
    named = [{"node": "leafsearch-machine-m1", "folder": "/d"}]
    assert backend.named(named) == named


def machines(placement: list[dict[str, Any]]) -> list[str]:
    return [entry["node"] for entry in placement]


def test_a_machine_is_there_while_a_node_ray_can_start_its_actor_on_is(backend: Any) -> None:
    from leafsearch.ray_backend.cluster import Machine

    backend.nodes = [
        node("a", {"node:10.0.0.1": 1}, alive=False),
        node("c", {"node:10.0.0.1": 1, "leafsearch-machine-big": 1}),  # (the host's address too)
        node("gone", {"node:10.0.0.9": 1, "leafsearch-machine-m5": 1}, alive=False),
    ]
    assert Machine("node:10.0.0.1", None).present() and Machine("leafsearch-machine-big", None).present()
    assert not Machine("leafsearch-machine-m5", None).present()
    assert Machine("leafsearch-machine-m5", None) == Machine("leafsearch-machine-m5", object())


def test_a_machine_whose_raylet_refuses_connections_is_gone_before_ray_marks_it_dead(backend: Any) -> None:
    """Its processes killed, a node is alive to Ray until its health checks fail (seconds); its
    raylet's port refusing connections is the machine gone now (remote.py `until_gone` fails its
    calls at once). A port that accepts, or a node listed without one, is there."""
    import socket

    from leafsearch.ray_backend.cluster import Machine

    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        with socket.create_server(("127.0.0.1", 0)) as closed:
            refused = closed.getsockname()[1]
        raylet = {"NodeManagerAddress": "127.0.0.1"}
        backend.nodes = [
            node("a", {"leafsearch-machine-m1": 1}) | raylet | {"NodeManagerPort": port},
            node("b", {"leafsearch-machine-m2": 1}) | raylet | {"NodeManagerPort": refused},
            node("c", {"leafsearch-machine-m3": 1}),
        ]
        assert Machine("leafsearch-machine-m1", None).present()
        assert not Machine("leafsearch-machine-m2", None).present()
        assert Machine("leafsearch-machine-m3", None).present()
        # A machine with a node whose raylet listens beside the killed one's is there.
        backend.nodes.append(node("d", {"leafsearch-machine-m2": 1}) | raylet | {"NodeManagerPort": port})
        assert Machine("leafsearch-machine-m2", None).present()
