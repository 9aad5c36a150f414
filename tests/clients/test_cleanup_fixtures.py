"""What client libraries' test fixtures call between tests to wipe a cluster (templates, data
streams, snapshots and repositories, indices, pending tasks), through the official client, on a
node holding one of each: every call answers as Elasticsearch does, and the node is empty after."""

from __future__ import annotations

from pathlib import Path

from conftest import running_server
from elasticsearch import Elasticsearch


def test_a_wipe_between_tests_empties_the_node(tmp_path: Path) -> None:
    repos = tmp_path / "repos"
    repos.mkdir()
    with running_server(tmp_path / "data", "--path-repo", str(repos)) as (url, _):
        es = Elasticsearch(url, request_timeout=60)
        # as the fixtures' clusters are set up (Elasticsearch 8 refuses `DELETE /*` by default)
        es.cluster.put_settings(persistent={"action.destructive_requires_name": False})
        es.cluster.put_component_template(name="c", template={"settings": {"number_of_shards": 1}})
        es.indices.put_index_template(
            name="logs", index_patterns=["logs-*"], data_stream={}, composed_of=["c"]
        )
        es.indices.put_template(name="legacy", index_patterns=["old-*"])
        es.index(index="logs-app", document={"@timestamp": "2024-01-01T00:00:00Z"}, op_type="create")
        es.index(index="plain", document={"a": 1}, refresh=True)
        es.snapshot.create_repository(name="backup", repository={"type": "fs", "settings": {"location": "b"}})
        es.snapshot.create(repository="backup", snapshot="s1", wait_for_completion=True)

        # the wipe, in the order the fixtures run it
        for name in es.snapshot.get_repository(name="_all"):
            for snapshot in es.snapshot.get(repository=name, snapshot="_all")["snapshots"]:
                es.snapshot.delete(repository=name, snapshot=snapshot["snapshot"])
            es.snapshot.delete_repository(name=name)
        es.indices.delete_data_stream(name="*", expand_wildcards="all")
        es.indices.delete(index="*", expand_wildcards="all", ignore_unavailable=True)
        es.indices.delete_index_template(name="*")
        es.indices.delete_template(name="*")
        es.cluster.delete_component_template(name="*")
        assert es.cluster.pending_tasks()["tasks"] == []
        es.clear_scroll(scroll_id="_all")

        assert es.snapshot.get_repository(name="_all").body == {}
        assert es.indices.get_data_stream(name="*")["data_streams"] == []
        assert es.indices.get(index="*", expand_wildcards="all").body == {}
        assert es.indices.get_index_template()["index_templates"] == []
        assert es.indices.get_template().body == {}
        assert es.cluster.get_component_template()["component_templates"] == []
        assert es.cluster.state(metric="metadata")["metadata"]["indices"] == {}
        assert list((repos / "b" / "blobs").iterdir()) == []
        es.close()
