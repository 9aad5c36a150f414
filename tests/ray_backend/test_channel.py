"""A machine call's channel (ray_backend/channel.py): the socket a coordinator sends a machine
actor's calls on. First the channel alone, its server in a child process that the tests kill;
then on a local 3-node Ray cluster, against the machine actors and through the REST API."""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from leafsearch.errors import ShardUnavailable
from leafsearch.ray_backend.channel import (
    MAX_HANDSHAKES,
    ChannelBroken,
    Channels,
    ChannelTimeout,
    connect,
)
from tests import web
from tests.concurrency import stop_process, wait_for
from tests.ray_backend import channel_child
from tests.ray_backend.channel_child import HANG, KEY, Child, Machine

child = channel_child.child  # the fixture: a machine's channel server in a child process


def _ask(channels: Channels, message: bytes, seconds: float = 30.0) -> bytes:
    deadline = time.monotonic() + seconds
    return channels.send(Machine, message, deadline).answer(deadline)


def test_calls_from_several_threads_are_answered_each_on_a_connection_kept_for_the_next(child: Child) -> None:
    channels = Channels(KEY, child.locate)
    answers: dict[int, list[bytes]] = {}

    def client(n: int) -> None:
        answers[n] = [_ask(channels, f"call {n} {i}".encode()) for i in range(20)]

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pid = str(child.process.pid).encode()
    assert answers == {n: [f"CALL {n} {i}".encode() + pid for i in range(20)] for n in range(4)}
    assert child.located == 1  # asked once; the connections were kept and reused
    assert len(channels._machines[Machine].idle) <= 4
    channels.close()


def test_a_wrong_secret_is_refused_and_a_silent_peer_holds_up_no_one(child: Child) -> None:
    with pytest.raises(ChannelBroken, match="refused"):
        connect(child.address, b"w" * 32)
    import socket

    with socket.create_connection(child.address):  # connected, never authenticates
        assert _ask(Channels(KEY, child.locate), b"hello").startswith(b"HELLO")
        with pytest.raises(ChannelBroken, match="refused"):  # nor does a refusal stop the server
            _ask(Channels(b"w" * 32, child.locate), b"hello")


def test_peers_that_never_authenticate_take_a_bounded_number_of_threads(child: Child) -> None:
    """Each connection being authenticated holds a thread of the actor for up to
    `HANDSHAKE_SECONDS`: past `MAX_HANDSHAKES` of them a new connection is closed at once, and
    once they go, the channel serves again."""
    import socket

    silent = [socket.create_connection(child.address) for _ in range(MAX_HANDSHAKES)]
    try:
        for sock in silent:  # each was accepted: the actor sent it its challenge
            assert sock.recv(1)
        with socket.create_connection(child.address) as one_more:
            one_more.settimeout(30)
            assert one_more.recv(1) == b""  # closed without a thread
    finally:
        for sock in silent:
            sock.close()

    def served() -> bool:
        try:
            return _ask(Channels(KEY, child.locate), b"hello").startswith(b"HELLO")
        except ChannelBroken:  # (the actor has not seen every silent peer go yet)
            return False

    wait_for(served)


def test_a_machine_killed_under_a_call_breaks_it_and_the_next_call_finds_the_restarted_one(
    child: Child,
) -> None:
    channels = Channels(KEY, child.locate)
    assert _ask(channels, b"a").startswith(b"A")
    deadline = time.monotonic() + 30
    pending = channels.send(Machine, HANG, deadline)
    child.kill()
    with pytest.raises(ChannelBroken):
        pending.answer(deadline)
    child.start()  # Ray's restart: another process, another address
    assert _ask(channels, b"b") == b"B" + str(child.process.pid).encode()
    assert child.located == 2


def test_an_idle_connection_to_a_machine_that_restarted_is_not_used(child: Child) -> None:
    channels = Channels(KEY, child.locate)
    assert _ask(channels, b"a").startswith(b"A")
    child.kill()
    child.start()
    # the kept connection is at its end: the call goes to the new process at once, not failed
    assert _ask(channels, b"b") == b"B" + str(child.process.pid).encode()


def test_a_call_not_answered_by_its_deadline_times_out_and_frees_its_connection(
    child: Child, monkeypatch
) -> None:
    from leafsearch.ray_backend import channel

    monkeypatch.setattr(channel, "MAX_CONNECTIONS", 1)
    channels = Channels(KEY, child.locate)
    with pytest.raises(ChannelTimeout):
        _ask(channels, HANG, seconds=0.5)
    assert _ask(channels, b"after").startswith(b"AFTER")  # the one slot is free again


# ---- on Ray ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def coordinator(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.ray_cluster import ray_server

    with ray_server(ray_cluster.address, tmp_path_factory.mktemp("channel") / "data") as server:
        yield server


@pytest.fixture
def http(coordinator: Any) -> Iterator[httpx.Client]:
    with web.Client(base_url=coordinator.url, timeout=120) as client:
        yield client
        for row in client.get("/_cat/indices", params={"format": "json", "h": "index"}).json():
            client.delete(f"/{row['index']}")


NDJSON = {"content-type": "application/x-ndjson"}


def _bulk(http: httpx.Client, index: str, ids: range, refresh: bool = False) -> httpx.Response:
    lines = [orjson.dumps({"index": {"_id": str(i)}}) + b"\n" + orjson.dumps({"n": i}) + b"\n" for i in ids]
    return http.post(
        f"/{index}/_bulk", params={"refresh": str(refresh).lower()}, content=b"".join(lines), headers=NDJSON
    )


def _index(http: httpx.Client, name: str, docs: int) -> str:
    body = {"settings": {"number_of_shards": 3}, "mappings": {"properties": {"n": {"type": "long"}}}}
    assert http.put(f"/{name}", json=body).status_code == 200
    assert _bulk(http, name, range(docs), refresh=True).json()["errors"] is False
    return http.get(f"/{name}/_settings").json()[name]["settings"]["index"]["uuid"]


def _channels() -> Channels:
    from leafsearch.ray_backend.channel import address_from_ray
    from leafsearch.ray_backend.metadata import cluster_secret

    return Channels(cluster_secret(), address_from_ray)


def test_a_machine_call_on_the_channel_answers_as_through_ray(http: httpx.Client) -> None:
    import ray

    from tests.ray_cluster import machine_actor

    uuid = _index(http, "chan", 30)
    machine = machine_actor(uuid, 0)
    message = pickle.dumps([((uuid, 0), "where", ()), ((uuid, 0), "stats", ())])
    through_ray = pickle.loads(ray.get(machine.batch.remote(message), timeout=60))
    channels = _channels()
    deadline = time.monotonic() + 60
    on_channel = pickle.loads(channels.send(machine, message, deadline).answer(deadline))
    assert on_channel[0] == through_ray[0]  # (node, pid): the same actor answered
    assert on_channel[1]["docs"] == through_ray[1]["docs"] > 0
    address = tuple(ray.get(machine.channel.remote(), timeout=60))
    with pytest.raises(ChannelBroken, match="refused"):  # the cluster's secret or nothing
        connect(address, b"x" * 32)
    channels.close()


def test_a_machine_killed_under_a_call_fails_a_write_and_a_read_goes_on_once_ray_restarted_it(
    http: httpx.Client,
) -> None:
    import ray

    from leafsearch.ray_backend.remote import send_calls
    from tests.ray_cluster import copy_nodes, machine_actor, shard_map, where

    uuid = _index(http, "chankill", 30)
    machine = machine_actor(uuid, 0)
    channels = _channels()
    node = where(uuid, 0)[0]
    call = ((uuid, 0), "refresh", ())
    killed = copy_nodes(uuid, 0)[0]  # (the machine of the primary, whose actor `machine` is)

    def recovered() -> bool:  # its copy, once the primary failed over, recovered from the new one
        entry = shard_map(uuid)[0]
        (copy,) = (c for c in entry["copies"] if c["node"] == killed)
        record = entry.get("recovery", {}).get(copy["id"], {})
        return record.get("stage") == "done" and copy["id"] in entry["in_sync"]

    for again, method in ((False, "refresh"), (True, "where")):
        (known,) = send_calls(channels, [(machine, ((uuid, 0), "where", ()), "[chankill][0]")], again=True)
        pid = known()[1]  # (and the channel connected: no question to Ray while the actor is stopped)
        stop_process(pid)  # the call reaches the actor's socket, not its answer
        try:
            (wait,) = send_calls(channels, [(machine, ((uuid, 0), method, ()), "[chankill][0]")], again=again)
        finally:
            os.kill(pid, signal.SIGKILL)
        if again:  # a read is sent again to the restarted actor (its primary failed over meanwhile)
            answer = wait()
            restarted = tuple(ray.get(machine.where.options(max_task_retries=-1).remote(), timeout=60))
            # (answered by a new process of the actor on its node; Ray may have restarted it again
            # since, once seen in a loaded run, so the pid Ray gives now is not compared with it)
            assert answer[0] == restarted[0] == node and answer[1] != pid and restarted[1] != pid
        else:  # a write is the shard's clean failure, never resent
            with pytest.raises(ShardUnavailable, match=r"\[chankill\]\[0\] is unavailable: ChannelBroken"):
                wait()
            # The copy recovers before the next kill: one killed while it recovers is not reopened
            # by the restarted actor (its folder is incomplete) until a coordinator hosts it again,
            # so the read sent again would be refused there as a shard not open.
            wait_for(recovered)

    def takes_writes() -> bool:  # the restarted machine's copy, once recovered from the new primary
        (wait,) = send_calls(channels, [(machine, call, "[chankill][0]")])
        try:
            return wait() is None
        except ShardUnavailable as exc:  # (until then: its calls are refused, as a shard not open)
            assert str(exc).endswith("[chankill][0] is recovering on this machine")
            return False

    wait_for(takes_writes)
    search = http.post("/chankill/_search", json={"size": 0, "track_total_hits": True}).json()
    assert search["hits"]["total"]["value"] == 30 and search["_shards"]["failed"] == 0
    channels.close()


def test_concurrent_searches_with_a_bulk_writer_beside(http: httpx.Client, coordinator: Any) -> None:
    _index(http, "chanbusy", 300)
    stop = threading.Event()
    failures: list[str] = []
    written = [300]

    def writer() -> None:
        with web.Client(base_url=coordinator.url, timeout=120) as own:
            n = 300
            while not stop.is_set() and n < 1500:
                answer = _bulk(own, "chanbusy", range(n, n + 100))
                if answer.status_code != 200 or answer.json()["errors"]:
                    failures.append(answer.text[:300])
                    return
                n += 100
                written[0] = n

    def searcher(k: int) -> None:
        with web.Client(base_url=coordinator.url, timeout=120) as own:
            for i in range(25):
                low = (k * 37 + i * 11) % 250
                body = {"query": {"range": {"n": {"gte": low, "lt": low + 50}}}, "size": 100, "sort": ["n"]}
                answer = own.post("/chanbusy/_search", json=body)
                hits = answer.json().get("hits", {}).get("hits", [])
                # the first 300 documents never change: each search sees exactly its 50
                if answer.status_code != 200 or [h["sort"][0] for h in hits] != list(range(low, low + 50)):
                    failures.append(f"{low}: {answer.status_code} {answer.text[:300]}")

    threads = [threading.Thread(target=writer)] + [
        threading.Thread(target=searcher, args=(k,)) for k in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads[1:]:
        thread.join()
    stop.set()
    threads[0].join()
    assert failures == []
    assert http.post("/chanbusy/_refresh").status_code == 200
    assert http.get("/chanbusy/_count").json()["count"] == written[0]
