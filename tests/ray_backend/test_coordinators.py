"""Several coordinators on one Ray cluster (`leafsearch serve --ray ADDRESS` started twice, each on
its own data folder): the same indices through both, the cluster's metadata in one place.

- a PIT walk and a sliced scroll paged through both coordinators in turn, every document of the
  snapshot exactly once with a writer beside; the walk finished through one after the other was
  killed with `kill -9`;
- index creation, mapping changes (dynamic and explicit), aliases and deletion made through one
  are seen by the next request through the other, and so are index templates, data streams,
  stored scripts and cluster settings (also by a coordinator started afterwards); two creations of
  one index at once, one per coordinator: one wins, the other gets
  `resource_already_exists_exception`;
- the metadata actor killed: Ray restarts it, and it has every index, mapping and context back;
- the open-context limit counts both coordinators' contexts; a forged id, or another user's, is
  refused by either; a user and an API key created through one authenticate on the other.

As the other Ray modules: one local 3-node cluster for the module (`ray_cluster`), coordinators as
subprocesses. The cluster's metadata lives as long as the cluster: the module's coordinators
(`pair`) serve every test, each test cleaning up what it created.
"""

from __future__ import annotations

import base64
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from elasticsearch import ApiError, AuthenticationException, Elasticsearch, NotFoundError

from leafsearch.testing import Server
from tests import web
from tests.node.test_durable_contexts import MAPPING, PAGE, SLICES, Writer, fill, kill_9, pit_page
from tests.ray_backend.test_ray_contexts_restart import coordinator
from tests.server_zygote import SERVER_ZYGOTE

SETTINGS = {"number_of_shards": 3, "number_of_replicas": 0, "refresh_interval": "50ms"}


@pytest.fixture(scope="module")
def pair(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    """Two coordinators of the module's cluster, each on its own data folder."""
    root = tmp_path_factory.mktemp("coordinators")
    servers = [coordinator(ray_cluster.address, root / name) for name in ("a", "b")]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


def clients(pair: list[Server]) -> tuple[Elasticsearch, Elasticsearch]:
    return pair[0].client(), pair[1].client()


def forged(context_id: str) -> str:
    """The id with another token: the same context named, without the cluster's secret."""
    raw = base64.urlsafe_b64decode(context_id + "=" * (-len(context_id) % 4))
    return base64.urlsafe_b64encode(raw[:-32] + b"0" * 32).decode().rstrip("=")


def test_a_pit_walk_and_a_sliced_scroll_page_through_both_coordinators_with_a_writer_beside(
    pair: list[Server],
) -> None:
    a, b = clients(pair)
    a.indices.create(index="walks", settings=SETTINGS, mappings=MAPPING)
    truth = fill(b, "walks")  # written through the other coordinator
    writer = Writer("walks", 7)
    try:
        pit_id = b.open_point_in_time(index="walks", keep_alive="5m").body["id"]
        scrolls, slice_hits = [], []
        for i in range(SLICES):
            first = a.search(
                index="walks", scroll="5m", size=PAGE, slice={"id": i, "max": SLICES}, sort=["_doc"]
            ).body
            scrolls.append(first["_scroll_id"])
            slice_hits.append(first["hits"]["hits"])
        writer.start(pair[0].url)
        pit_hits: list[dict[str, Any]] = []
        after = None
        turn = 0
        while True:  # the PIT's pages through each coordinator in turn
            page = pit_page((a, b)[turn % 2], pit_id, after)
            turn += 1
            assert page["_shards"]["failed"] == 0
            pit_hits += page["hits"]["hits"]
            if len(page["hits"]["hits"]) < PAGE:
                break
            after = page["hits"]["hits"][-1]["sort"]
        done = [False] * SLICES
        while not all(done):  # each slice's batches through each coordinator in turn
            for i in range(SLICES):
                if not done[i]:
                    batch = (b, a)[turn % 2].scroll(scroll_id=scrolls[i], scroll="5m").body
                    turn += 1
                    assert batch["_shards"]["failed"] == 0
                    slice_hits[i] += batch["hits"]["hits"]
                    scrolls[i] = batch["_scroll_id"]
                    done[i] = not batch["hits"]["hits"]
        writer.stop()
        assert writer.ops > 0
        sliced = [hit for hits in slice_hits for hit in hits]
        for walk in (pit_hits, sliced):
            ids = [hit["_id"] for hit in walk]
            assert len(ids) == len(set(ids)), "a document came twice"
            assert sorted(ids) == sorted(truth), "the walk missed documents"
            assert all(hit["_source"] == truth[hit["_id"]] for hit in walk), "a source changed"
        # Ids are the cluster's, authenticated with its secret: a forged token is unknown to both.
        for es in (a, b):
            with pytest.raises(NotFoundError):
                es.search(pit={"id": forged(pit_id)}, size=1)
            with pytest.raises(NotFoundError):
                es.scroll(scroll_id=forged(scrolls[0]), scroll="1m")
        # Closed through the coordinator that did not open them; gone for the other one too.
        assert a.close_point_in_time(id=pit_id).body["num_freed"] == 1
        assert b.clear_scroll(scroll_id=scrolls).body["num_freed"] == SLICES
        with pytest.raises(NotFoundError):
            b.search(pit={"id": pit_id}, size=1)
        with pytest.raises(NotFoundError):
            a.scroll(scroll_id=scrolls[1], scroll="1m")
    finally:
        writer.stop()
        a.indices.delete(index="walks")


def test_an_index_made_changed_and_deleted_through_one_is_seen_at_once_through_the_other(
    pair: list[Server],
) -> None:
    a, b = clients(pair)
    a.indices.create(index="meta", settings={"number_of_shards": 2, "number_of_replicas": 0})
    assert b.indices.exists(index="meta")
    # A dynamic mapping update by a write through one is the other's mapping at its next request,
    # and a field it adds beside it on the other stays too.
    a.index(index="meta", id="1", document={"title": "first one", "n": 5})
    b.index(index="meta", id="2", document={"tag": "red", "n": 7}, refresh=True)
    for es in (a, b):
        properties = es.indices.get_mapping(index="meta").body["meta"]["mappings"]["properties"]
        assert properties["title"]["type"] == "text"
        assert properties["n"]["type"] == "long"
        assert properties["tag"]["type"] == "text"
    # An explicit mapping change and an alias through one, searched through the other.
    b.indices.put_mapping(index="meta", properties={"when": {"type": "date"}})
    a.index(index="meta", id="3", document={"when": "2024-05-01", "n": 9}, refresh=True)
    a.indices.put_alias(index="meta", name="meta-alias", filter={"range": {"n": {"gte": 6}}})
    found = b.search(index="meta-alias", query={"range": {"when": {"gte": "2024-01-01"}}}).body
    assert [hit["_id"] for hit in found["hits"]["hits"]] == ["3"]
    assert b.count(index="meta-alias").body["count"] == 2
    # The mapping's conflict is the put-mapping error through either.
    with pytest.raises(ApiError) as refused:
        a.indices.put_mapping(index="meta", properties={"when": {"type": "keyword"}})
    assert refused.value.status_code == 400
    # Settings through one, read through the other.
    b.indices.put_settings(index="meta", settings={"index.max_result_window": 500})
    settings = a.indices.get_settings(index="meta").body["meta"]["settings"]["index"]
    assert settings["max_result_window"] == "500"
    # Deleted through the other: gone for both, and the alias with it.
    b.indices.delete(index="meta")
    for es in (a, b):
        assert not es.indices.exists(index="meta")
        assert not es.indices.exists_alias(name="meta-alias")
        with pytest.raises(NotFoundError):
            es.search(index="meta")


def test_templates_scripts_streams_and_cluster_settings_made_through_one_are_the_others(
    ray_cluster: Any, pair: list[Server], tmp_path: Path
) -> None:
    a, b = clients(pair)
    a.indices.put_index_template(
        index_patterns=["tpl-*"],
        name="tpl",
        template={
            "settings": {"number_of_shards": 2, "number_of_replicas": 0},
            "mappings": {"properties": {"code": {"type": "keyword"}}},
        },
    )
    a.indices.put_index_template(
        name="streams",
        index_patterns=["logs-*"],
        data_stream={},
        template={"settings": {"number_of_replicas": 0}},
    )
    a.put_script(id="double", script={"lang": "painless", "source": "doc['n'].value * 2"})
    a.cluster.put_settings(
        persistent={"search.max_keep_alive": "2h"}, transient={"search.default_keep_alive": "3m"}
    )
    # Through the other: the template shapes an index it creates, the script scores its search.
    b.index(index="tpl-1", id="1", document={"code": "A-1", "n": 4}, refresh=True)
    mapping = b.indices.get_mapping(index="tpl-1").body["tpl-1"]["mappings"]["properties"]
    assert mapping["code"]["type"] == "keyword"
    assert b.indices.get_settings(index="tpl-1").body["tpl-1"]["settings"]["index"]["number_of_shards"] == "2"
    scored = b.search(
        index="tpl-1", query={"script_score": {"query": {"match_all": {}}, "script": {"id": "double"}}}
    )
    assert scored.body["hits"]["hits"][0]["_score"] == 8.0
    settings = b.cluster.get_settings(flat_settings=True).body
    assert settings["persistent"] == {"search.max_keep_alive": "2h"}
    assert settings["transient"] == {"search.default_keep_alive": "3m"}
    # A data stream made by a write through the other, written to and rolled over through one.
    b.index(index="logs-app", document={"@timestamp": "2024-05-01T00:00:00Z", "n": 1}, op_type="create")
    a.indices.rollover(alias="logs-app")
    a.index(
        index="logs-app",
        document={"@timestamp": "2024-05-02T00:00:00Z", "n": 2},
        op_type="create",
        refresh=True,
    )
    a.indices.refresh(index="logs-app")
    for es in (a, b):
        stream = es.indices.get_data_stream(name="logs-app").body["data_streams"][0]
        assert stream["generation"] == 2 and len(stream["indices"]) == 2
        assert es.count(index="logs-app").body["count"] == 2
    # Two changes of one table at once from the same version, one per coordinator: both stay.
    script = {"script": {"lang": "painless", "source": "1"}}
    answers = at_once(pair, lambda http, side: [http.put(f"/_scripts/s-{side}", json=script)])
    assert [answer.status_code for answer in answers] == [200, 200], [answer.text for answer in answers]
    for es in (a, b):
        assert {es.get_script(id=name).body["found"] for name in ("s-a", "s-b", "double")} == {True}
    # A coordinator started afterwards has all of them from its first request.
    late = coordinator(ray_cluster.address, tmp_path / "late")
    try:
        c = late.client()
        assert c.indices.get_index_template(name="tpl").body["index_templates"][0]["name"] == "tpl"
        assert c.get_script(id="double").body["script"]["source"] == "doc['n'].value * 2"
        assert c.cluster.get_settings(flat_settings=True).body["transient"] == {
            "search.default_keep_alive": "3m"
        }
        assert c.indices.get_data_stream(name="logs-app").body["data_streams"][0]["generation"] == 2
        # Deleted through the late one: gone for the others.
        c.indices.delete_data_stream(name="logs-app")
        c.indices.delete_index_template(name="streams")
        c.delete_script(id="double")
        c.cluster.put_settings(
            persistent={"search.max_keep_alive": None}, transient={"search.default_keep_alive": None}
        )
    finally:
        late.stop()
    for es in (a, b):
        assert not es.indices.exists_index_template(name="streams")
        with pytest.raises(NotFoundError):
            es.get_script(id="double")
        with pytest.raises(NotFoundError):
            es.indices.get_data_stream(name="logs-app")
        settings = es.cluster.get_settings().body
        assert settings["persistent"] == {} and settings["transient"] == {}
    for name in ("s-a", "s-b"):
        a.delete_script(id=name)
    a.indices.delete_index_template(name="tpl")
    a.indices.delete(index="tpl-1")


def at_once(
    pair: list[Server], work: Callable[[httpx.Client, str], list[httpx.Response]]
) -> list[httpx.Response]:
    """`work` through each coordinator (with its side, "a" or "b"), both let go at once; every
    answer."""
    barrier = threading.Barrier(len(pair))
    answers: list[httpx.Response] = []

    def run(url: str, side: str) -> None:
        with web.Client(base_url=url, timeout=120) as http:
            barrier.wait()
            answers.extend(work(http, side))

    threads = [threading.Thread(target=run, args=(s.url, side)) for s, side in zip(pair, "ab", strict=True)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def add_fields(http: httpx.Client, side: str) -> list[httpx.Response]:
    """Documents each adding a new field, through one coordinator (its dynamic mapping updates
    race the other's)."""
    return [http.put(f"/fields/_doc/{side}{i}", json={f"{side}_{i}": i, "both": side}) for i in range(8)]


def test_dynamic_mapping_updates_through_both_coordinators_at_once_all_stay(pair: list[Server]) -> None:
    a, b = clients(pair)
    a.indices.create(index="fields", settings={"number_of_shards": 3, "number_of_replicas": 0})
    errors = [answer.text for answer in at_once(pair, add_fields) if answer.status_code not in (200, 201)]
    assert not errors
    a.indices.refresh(index="fields")
    for es in (a, b):
        properties = es.indices.get_mapping(index="fields").body["fields"]["mappings"]["properties"]
        assert {f"{side}_{i}" for side in "ab" for i in range(8)} <= set(properties)
        for side in "ab":
            for i in range(8):
                found = es.search(index="fields", query={"term": {f"{side}_{i}": i}}).body["hits"]["hits"]
                assert [hit["_id"] for hit in found] == [f"{side}{i}"]
    a.indices.delete(index="fields")


def test_aliases_added_through_both_coordinators_at_once_all_stay(pair: list[Server]) -> None:
    a, b = clients(pair)
    a.indices.create(index="named", settings={"number_of_replicas": 0})
    answers = at_once(pair, lambda http, side: [http.put(f"/named/_alias/{side}-{i}") for i in range(5)])
    errors = [answer.text for answer in answers if answer.status_code != 200]
    assert not errors
    expected = {f"{side}-{i}" for side in "ab" for i in range(5)}
    for es in (a, b):
        assert set(es.indices.get_alias(index="named").body["named"]["aliases"]) == expected
    b.indices.delete_alias(index="named", name="a-*")
    assert set(a.indices.get_alias(index="named").body["named"]["aliases"]) == {f"b-{i}" for i in range(5)}
    a.indices.delete(index="named")


def test_two_coordinators_creating_one_index_at_once_one_wins(pair: list[Server]) -> None:
    settings = {"settings": {"number_of_replicas": 0}}
    for round_ in range(3):
        name = f"race-{round_}"
        answers = at_once(pair, lambda http, side, name=name: [http.put(f"/{name}", json=settings)])
        assert sorted(r.status_code for r in answers) == [200, 400], [r.text for r in answers]
        loser = next(r for r in answers if r.status_code == 400).json()["error"]
        assert loser["type"] == "resource_already_exists_exception"
        uuids = {
            server.client().indices.get_settings(index=name).body[name]["settings"]["index"]["uuid"]
            for server in pair
        }
        assert len(uuids) == 1 and loser["index_uuid"] in uuids
        pair[round_ % 2].client().indices.delete(index=name)


def test_the_open_context_limit_counts_every_coordinators_contexts(pair: list[Server]) -> None:
    a, b = clients(pair)
    a.indices.create(index="limits", settings={"number_of_shards": 1, "number_of_replicas": 0})
    a.cluster.put_settings(persistent={"search.max_open_pit_context": 2})
    b.cluster.put_settings(persistent={"search.max_open_pit_context": 2})
    try:
        first = a.open_point_in_time(index="limits", keep_alive="1m").body["id"]
        second = b.open_point_in_time(index="limits", keep_alive="1m").body["id"]
        for es in (a, b):
            with pytest.raises(ApiError) as refused:
                es.open_point_in_time(index="limits", keep_alive="1m")
            assert refused.value.status_code == 429
        assert b.close_point_in_time(id=first).body["num_freed"] == 1
        third = a.open_point_in_time(index="limits", keep_alive="1m").body["id"]
        for pit in (second, third):
            assert a.close_point_in_time(id=pit).body["num_freed"] == 1
        # Clearing every scroll through one clears those opened through the other.
        scroll_id = a.search(index="limits", scroll="1m", size=1).body["_scroll_id"]
        assert b.clear_scroll(scroll_id="_all").body["num_freed"] == 1
        with pytest.raises(NotFoundError):
            a.scroll(scroll_id=scroll_id, scroll="1m")
    finally:
        for es in (a, b):
            es.cluster.put_settings(persistent={"search.max_open_pit_context": None})
        a.indices.delete(index="limits")


def test_the_metadata_survives_its_actors_death(pair: list[Server]) -> None:
    """Ray restarts the metadata actor, which reads the cluster's metadata back from the GCS:
    indices, mappings and contexts go on, and a creation after it is still checked."""
    import ray

    a, b = clients(pair)
    a.indices.create(index="lasting", settings={"number_of_replicas": 0})
    a.index(index="lasting", id="1", document={"kept": "yes"}, refresh=True)
    pit_id = a.open_point_in_time(index="lasting", keep_alive="1m").body["id"]
    actor = ray.get_actor("metadata", namespace="leafsearch")
    ray.kill(actor, no_restart=False)
    b.indices.put_mapping(index="lasting", properties={"later": {"type": "keyword"}})
    properties = a.indices.get_mapping(index="lasting").body["lasting"]["mappings"]["properties"]
    assert set(properties) == {"kept", "later"}
    assert b.search(pit={"id": pit_id}, size=0).body["hits"]["total"]["value"] == 1
    with pytest.raises(ApiError) as refused:
        b.indices.create(index="lasting")
    assert refused.value.body["error"]["type"] == "resource_already_exists_exception"
    assert b.close_point_in_time(id=pit_id).body["num_freed"] == 1
    b.indices.delete(index="lasting")


def test_a_pit_paged_fast_writes_its_record_about_once_a_second_and_it_outlasts_the_keep_alive(
    pair: list[Server],
) -> None:
    """A shared PIT's pages write its record in the cluster only when their keep-alive passes
    what it says (it says a second more, `RECORD_SLACK_SECONDS`): an export's pages are not a
    metadata call each. The record always covers the keep-alive from the last page, so the other
    coordinator pages on, and no reaper frees it early."""
    import pickle
    import time

    import ray

    a, b = clients(pair)
    a.indices.create(index="fastpit", settings=SETTINGS, mappings=MAPPING)
    a.index(index="fastpit", id="1", document={"n": 1}, refresh=True)
    store = ray.get_actor("metadata", namespace="leafsearch")
    before = set(ray.get(store.ctx_keys.remote("pit")))
    pit_id = a.open_point_in_time(index="fastpit", keep_alive="30s").body["id"]
    (key,) = set(ray.get(store.ctx_keys.remote("pit"))) - before
    written = set()
    began = time.time()
    for _ in range(20):
        sent = time.time()
        page = a.search(pit={"id": pit_id, "keep_alive": "30s"}, size=1).body
        assert page["hits"]["total"]["value"] == 1
        record = pickle.loads(ray.get(store.ctx_get.remote(key))[0])
        assert record["expires_wall"] >= sent + 30
        written.add(record["expires_wall"])
    assert len(written) <= time.time() - began + 2  # (each page wrote one before)
    assert b.search(pit={"id": pit_id, "keep_alive": "30s"}, size=1).body["hits"]["total"]["value"] == 1
    assert b.close_point_in_time(id=pit_id).body["num_freed"] == 1
    a.indices.delete(index="fastpit")


def test_a_pit_paged_through_one_coordinator_reads_its_record_only_when_a_record_changed(
    pair: list[Server],
) -> None:
    """A PIT's pages through the coordinator holding its latest record read no record from the
    cluster (the contexts' version each request asks first has not moved: an export's pages are
    not a metadata call each), yet a PIT closed through the other coordinator is gone for the
    next page at once: a 404, not a page of failed shards, in `_shard_doc` order and sliced too
    (which asks its cursor's shard alone)."""
    import ray

    a, b = clients(pair)
    a.indices.create(index="quietpit", settings=SETTINGS, mappings=MAPPING)
    for i in range(30):
        a.index(index="quietpit", id=str(i), document={"n": i})
    a.indices.refresh(index="quietpit")
    store = ray.get_actor("metadata", namespace="leafsearch")

    def record_reads() -> int:
        return ray.get(store.stats.remote())["calls"].get("ctx_get", 0)

    pit_id = a.open_point_in_time(index="quietpit", keep_alive="5m").body["id"]
    body = {"size": 1, "sort": ["_shard_doc"], "track_total_hits": False}
    body["pit"] = {"id": pit_id, "keep_alive": "5m"}
    a.search(**body)  # (its record written again: a second more than the keep-alive)
    before = record_reads()
    for _ in range(20):
        page = a.search(**body).body
        assert page["_shards"]["failed"] == 0 and len(page["hits"]["hits"]) == 1
        body["search_after"] = page["hits"]["hits"][-1]["sort"]
    assert record_reads() - before <= 5  # (a page that wrote the record makes the next read it)
    sliced = {**body, "slice": {"id": 0, "max": 2}}
    sliced.pop("search_after")
    assert a.search(**sliced).body["_shards"]["failed"] == 0
    assert b.close_point_in_time(id=pit_id).body["num_freed"] == 1
    for asked in (body, sliced):
        with pytest.raises(NotFoundError):
            a.search(**asked)
    a.indices.delete(index="quietpit")


def test_a_walk_goes_on_through_one_coordinator_after_the_other_is_killed(
    ray_cluster: Any, pair: list[Server], tmp_path: Path
) -> None:
    doomed = coordinator(ray_cluster.address, tmp_path / "doomed")
    try:
        es = doomed.client()
        es.indices.create(index="orphan", settings=SETTINGS, mappings=MAPPING)
        truth = fill(es, "orphan")
        pit_id = es.open_point_in_time(index="orphan", keep_alive="5m").body["id"]
        first = es.search(index="orphan", scroll="5m", size=PAGE, sort=["_doc"]).body
        pit_hits = pit_page(es, pit_id, None)["hits"]["hits"]
        es.index(index="orphan", id="late", document={"n": -1}, refresh=True)
        kill_9(doomed)
        survivor = pair[1].client()
        while True:
            page = pit_page(survivor, pit_id, pit_hits[-1]["sort"])
            assert page["_shards"]["failed"] == 0
            pit_hits += page["hits"]["hits"]
            if len(page["hits"]["hits"]) < PAGE:
                break
        scroll_hits, scroll_id = first["hits"]["hits"], first["_scroll_id"]
        while True:
            batch = survivor.scroll(scroll_id=scroll_id, scroll="5m").body
            if not batch["hits"]["hits"]:
                break
            scroll_hits += batch["hits"]["hits"]
            scroll_id = batch["_scroll_id"]
        for walk in (pit_hits, scroll_hits):
            ids = [hit["_id"] for hit in walk]
            assert len(ids) == len(set(ids)) and sorted(ids) == sorted(truth)
        assert survivor.close_point_in_time(id=pit_id).body["num_freed"] == 1
        assert survivor.clear_scroll(scroll_id=scroll_id).body["num_freed"] == 1
        survivor.indices.delete(index="orphan")
    finally:
        doomed.stop()


def add_user(data: Path, name: str, password: str, role: str) -> None:
    command = [sys.executable, "-m", "leafsearch", "users", "add", name, "--data", str(data)]
    command += ["--role", role, "--password-stdin"]
    SERVER_ZYGOTE.run(command, input=password + "\n", text=True, check=True, capture_output=True)


def test_a_user_and_an_api_key_made_through_one_authenticate_on_the_other(pair: list[Server]) -> None:
    """Last: authentication then stays on for the cluster."""
    add_user(pair[0].data, "alice", "alice-secret-1", "superuser")
    add_user(pair[0].data, "bob", "bob-secret-12", "read:owned*")
    a = Elasticsearch(pair[0].url, basic_auth=("alice", "alice-secret-1"))
    b = Elasticsearch(pair[1].url, basic_auth=("alice", "alice-secret-1"))
    assert a.security.authenticate().body["username"] == "alice"  # the file's node publishes it
    assert b.security.authenticate().body["username"] == "alice"
    with pytest.raises(AuthenticationException):
        Elasticsearch(pair[1].url).info()
    key = a.security.create_api_key(name="k1").body
    by_key = Elasticsearch(pair[1].url, api_key=key["encoded"])
    assert by_key.security.authenticate().body["username"] == "alice"
    # A context is its opener's through every coordinator: bob's id is unknown to another user.
    b.indices.create(index="owned", settings={"number_of_replicas": 0})
    bob = Elasticsearch(pair[1].url, basic_auth=("bob", "bob-secret-12"))
    pit_id = bob.open_point_in_time(index="owned", keep_alive="1m").body["id"]
    by_key_elsewhere = Elasticsearch(pair[0].url, api_key=key["encoded"])
    assert by_key_elsewhere.search(pit={"id": pit_id}, size=0).body["hits"]["total"]["value"] == 0
    other = Elasticsearch(pair[0].url, basic_auth=("bob", "bob-secret-12"))
    assert other.search(pit={"id": pit_id}, size=0).body["_shards"]["failed"] == 0
    add_user(pair[0].data, "carol", "carol-secret-1", "read:owned*")
    carol = Elasticsearch(pair[1].url, basic_auth=("carol", "carol-secret-1"))
    a.info()  # (the users file's node publishes it at its next request)
    with pytest.raises(NotFoundError):
        carol.search(pit={"id": pit_id}, size=0)
    # An invalidated key is refused by the other coordinator at once.
    a.security.invalidate_api_key(ids=[key["id"]])
    with pytest.raises(AuthenticationException):
        Elasticsearch(pair[1].url, api_key=key["encoded"]).info()
    assert other.close_point_in_time(id=pit_id).body["num_freed"] == 1
    a.indices.delete(index="owned")
