"""The in-process API through its documentation: every Python example in docs/python-api.md runs
as written, each on a fresh data folder (`data_path`), and its own assertions must hold. Then
what the examples do not show: the client beside HTTP clients on one node."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

import leafsearch
from leafsearch.errors import ElasticError

DOC = Path(__file__).resolve().parent.parent / "docs" / "python-api.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_documentation_has_examples() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("number", range(len(EXAMPLES)))
def test_documented_example_runs(number: int, tmp_path: Path) -> None:
    exec(
        compile(EXAMPLES[number], f"docs/python-api.md example {number + 1}", "exec"), {"data_path": tmp_path}
    )


def test_unknown_parameters_and_endpoints_are_refused_as_over_http(tmp_path: Path) -> None:
    with leafsearch.Client(tmp_path) as es:
        es.indices.create(index="t")
        with pytest.raises(ElasticError) as err:
            es.get(index="t", id="1", refrsh=True)
        assert (
            err.value.status == 400
            and "request [/t/_doc/1] contains unrecognized parameter" in err.value.reason
        )
        with pytest.raises(ElasticError) as err:
            es.perform_request("GET", "/t/_nothing_here")
        assert err.value.status in (400, 405)
        assert es.indices.exists(index="t") and not es.indices.exists(index="nope")
        assert es.exists(index="t", id="1") is False
        with pytest.raises(ElasticError) as err:  # a missing document: 404 with the API's own body
            es.get(index="t", id="1")
        assert err.value.status == 404 and err.value.body() == {"_index": "t", "_id": "1", "found": False}


def test_clients_in_threads_write_and_read_one_node(tmp_path: Path) -> None:
    """Several threads index through their own clients on one node while another searches: every
    acknowledged document is found, and sources come back as dicts."""
    with leafsearch.Node(tmp_path / "n") as node:
        leafsearch.Client(node=node).indices.create(index="c", settings={"number_of_shards": 2})
        errors: list[BaseException] = []

        def write(worker: int) -> None:
            es = leafsearch.Client(node=node)
            try:
                for i in range(50):
                    es.index(index="c", id=f"{worker}-{i}", document={"w": worker, "i": i})
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for thread in threads:
            thread.start()
        reader = leafsearch.Client(node=node)
        while any(t.is_alive() for t in threads):
            reader.search(index="c", query={"match_all": {}}, size=5)
        for thread in threads:
            thread.join()
        assert not errors
        reader.indices.refresh(index="c")
        hits = reader.search(index="c", size=1000, sort=[{"w": "asc"}, {"i": "asc"}])["hits"]
        assert hits["total"]["value"] == 200
        assert hits["hits"][0]["_source"] == {"w": 0, "i": 0}
        # The node stays open when a client that did not open it is closed.
        reader.close()
        assert reader.count(index="c")["count"] == 200


def test_date_math_index_names_resolve_as_over_http(tmp_path: Path) -> None:
    import datetime

    def today() -> str:
        return datetime.datetime.now(datetime.UTC).strftime("%Y.%m.%d")

    with leafsearch.Client(tmp_path) as es:
        days = {today()}
        es.index(index="<logs-{now/d}>", id="1", document={"n": 1}, refresh=True)
        days.add(today())  # (the request may have run across midnight)
        assert list(es.indices.get(index="logs-*")) in ([f"logs-{day}"] for day in days)
