"""What tests/search/test_search_workers.py's client processes run: a sliced PIT walk and a sliced
scroll over HTTP. Apart from the test module so that each spawned client imports httpx alone, not
the test module and with it the engine and the suite's fixtures (about 0.6 s of CPU a process)."""

from __future__ import annotations

from typing import Any

from tests import web


def client_walk(url: str, pit: str, slice_id: int, slices: int) -> list[str]:
    ids: list[str] = []
    body: dict[str, Any] = {
        "size": 97,
        "pit": {"id": pit, "keep_alive": "1m"},
        "sort": ["_shard_doc"],
        "slice": {"id": slice_id, "max": slices},
    }
    with web.Client(base_url=url, timeout=60) as http:
        while True:
            response = http.post("/_search", json=body)
            assert response.status_code == 200, response.text
            hits = response.json()["hits"]["hits"]
            if not hits:
                return ids
            ids += [h["_id"] for h in hits]
            body["search_after"] = hits[-1]["sort"]


def client_scroll(url: str, index: str, slice_id: int, slices: int) -> list[str]:
    with web.Client(base_url=url, timeout=60) as http:
        body = {"size": 113, "sort": ["_doc"], "slice": {"id": slice_id, "max": slices}}
        page = http.post(f"/{index}/_search", params={"scroll": "1m"}, json=body).json()
        ids: list[str] = []
        while page["hits"]["hits"]:
            ids += [h["_id"] for h in page["hits"]["hits"]]
            page = http.post("/_search/scroll", json={"scroll": "1m", "scroll_id": page["_scroll_id"]}).json()
        http.request("DELETE", "/_search/scroll", json={"scroll_id": page["_scroll_id"]})
        return ids
