"""A bulk answer's items: a dict per item, except where a run of plain writes all succeeded.

Such a run's items are rendered at once from a template (`render_successes`), one string built
from columns (ids, versions, seq_nos), and stay bytes to the REST answer (`finish`): no dict is
built and encoded per document. Every other item (errors, updates, deletes) is a dict, as
Elasticsearch shapes it, encoded by orjson with the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from leafsearch.common.rawjson import RawJSON, fragment

#: A string orjson writes as it is, between quotes (it escapes only these).
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')
_STATUS = {True: 200, False: 201}


@dataclass(slots=True)
class Rendered:
    """The items of `count` consecutive positions, rendered and joined by commas; the positions
    after the first hold None."""

    json: bytes
    count: int


#: An item: a dict, rendered items, or None at a position a `Rendered` before it covers.
Item = dict[str, Any] | Rendered | None


class RenderedItems(RawJSON):
    """A bulk answer's `items` array as bytes, with the number of items per status family
    (1xx..5xx), which the node's counters take without decoding them."""

    __slots__ = ("families",)

    def __init__(self, data: bytes, families: list[int]) -> None:
        super().__init__(data)
        self.families = families


def render_successes(
    index_name: str,
    header: dict[str, int],
    kinds: list[str],
    ids: list[str],
    versions: list[int],
    seq_nos: list[int],
    updated: set[int],
    primary_term: int,
) -> bytes:
    """The items of successful index/create operations (each `{kind: {...}}` as `_bulk_item`
    builds it), one string built from columns: the items, one a line (a rendered item holds no
    line break: JSON escapes one in an id)."""
    n = len(ids)
    joined = "".join(ids)
    plain = joined.isprintable() and '"' not in joined and "\\" not in joined  # the common case, in C
    if not plain and not _PLAIN.fullmatch(joined):
        ids = [orjson.dumps(doc_id).decode()[1:-1] for doc_id in ids]
    name = orjson.dumps(index_name).decode()
    prefixes = {kind: f'{{"{kind}":{{"_index":{name},"_id":"' for kind in set(kinds)}
    shards = orjson.dumps(header).decode()
    middle = {
        was_updated: f',"result":"{"updated" if was_updated else "created"}","_shards":{shards},"_seq_no":'
        for was_updated in (False, True)
    }
    end = {
        was_updated: f',"_primary_term":{primary_term},"status":{_STATUS[was_updated]}}}}}\n'
        for was_updated in (False, True)
    }
    flat: list[str | None] = [None] * (7 * n)
    flat[0::7] = [prefixes[kinds[0]]] * n if len(prefixes) == 1 else [prefixes[k] for k in kinds]
    flat[1::7] = ids
    flat[2::7] = ['","_version":'] * n
    flat[3::7] = map(str, versions)
    flat[4::7] = [middle[False]] * n
    flat[5::7] = map(str, seq_nos)
    flat[6::7] = [end[False]] * n
    for i in updated:
        flat[7 * i + 4], flat[7 * i + 6] = middle[True], end[True]
    return "".join(flat)[:-1].encode()  # type: ignore[arg-type]


def place(results: list[Item], positions: list[int], rendered: bytes) -> None:
    """Put rendered items (one a line) at their positions: as one `Rendered` when the
    positions follow each other (a request's run on one shard), else one each."""
    if positions[-1] - positions[0] == len(positions) - 1:
        first = positions[0]
        results[first] = Rendered(rendered.replace(b"\n", b","), len(positions))
        results[first + 1 : first + len(positions)] = [None] * (len(positions) - 1)
        return
    for pos, item in zip(positions, rendered.split(b"\n"), strict=True):
        results[pos] = Rendered(item, 1)


def expand(results: list[Item], pos: int) -> None:
    """Decode the rendered items starting at `pos` (if any) into dicts at their positions."""
    rendered = results[pos]
    if isinstance(rendered, Rendered):
        results[pos : pos + rendered.count] = orjson.loads(b"[" + rendered.json + b"]")


def has_error(item: Item) -> bool:
    return type(item) is dict and "error" in next(iter(item.values()))


def finish(results: list[Item], *, raw: bool) -> list[dict[str, Any]] | RenderedItems:
    """The answer's `items`: as dicts, or (`raw`) as one array of bytes."""
    if not raw:
        for pos in range(len(results)):
            expand(results, pos)
        return results  # type: ignore[return-value]
    families = [0] * 5
    parts: list[bytes] = []
    dumps = orjson.dumps
    for item in filter(None, results):  # (None: a position a rendered run covers)
        if type(item) is Rendered:
            families[1] += item.count
            parts.append(item.json)
            continue
        (outcome,) = item.values()  # type: ignore[union-attr]
        family = outcome.get("status", 0) // 100
        if 1 <= family <= 5:
            families[family - 1] += 1
        parts.append(dumps(item, default=fragment))
    return RenderedItems(b"[" + b",".join(parts) + b"]", families)
