"""`indices.indexing.doc_status` of `_nodes/stats`: the document writes this node answered, counted
by the family of their HTTP status (`2xx`, `4xx`, `5xx`), as OpenSearch 2.x reports them (a
leafsearch extension to Elasticsearch's node stats).

Every index, create, update and delete counts once, whether it came alone or as a `_bulk` item,
with the status its answer carries: a created document 201, a delete of a missing one 404, a
version conflict 409. A request refused before any document is named (a malformed `_bulk` body)
counts nothing.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from leafsearch.errors import ElasticError
from leafsearch.write.bulk_items import RenderedItems

F = TypeVar("F", bound=Callable[..., Any])


class DocStatusCounter:
    """Counts per status family (1xx..5xx) of one node; writers of any thread share it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = [0] * 5

    def count(self, status: int, n: int = 1) -> None:
        family = status // 100
        if 1 <= family <= 5:
            with self._lock:
                self._counts[family - 1] += n

    def count_items(self, items: list[dict[str, Any]] | RenderedItems) -> None:
        """A `_bulk` answer's items (`{action: {..., "status": N}}`), or their rendered array
        and its counts."""
        families = [0] * 5
        if isinstance(items, RenderedItems):
            families, items = items.families, []
        for item in items:
            for outcome in item.values():
                family = outcome.get("status", 0) // 100
                if 1 <= family <= 5:
                    families[family - 1] += 1
        with self._lock:
            self._counts = [a + b for a, b in zip(self._counts, families, strict=True)]

    def stats(self) -> dict[str, int]:
        """The families seen so far (a family never seen is left out, as OpenSearch does)."""
        with self._lock:
            return {f"{i + 1}xx": n for i, n in enumerate(self._counts) if n}


def single_write_status(body: dict[str, Any]) -> int:
    """The status a single-document write answers with: 201 created, 404 a missing document's
    delete, else 200."""
    result = body.get("result")
    return 201 if result == "created" else 404 if result == "not_found" else 200


def counting_single(write: F, counter: DocStatusCounter) -> F:
    """`write` (index, create, update or delete of one document) counting its answer's status, or
    its refusal's."""

    @functools.wraps(write)
    def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            body = write(*args, **kwargs)
        except ElasticError as exc:
            counter.count(exc.status)
            raise
        counter.count(single_write_status(body))
        return body

    return counted  # type: ignore[return-value]


def counting_bulk(bulk: F, counter: DocStatusCounter) -> F:
    """`bulk` counting each item of its answer (a request refused as a whole counts nothing)."""

    @functools.wraps(bulk)
    def counted(*args: Any, **kwargs: Any) -> Any:
        body = bulk(*args, **kwargs)
        counter.count_items(body["items"])
        return body

    return counted  # type: ignore[return-value]
