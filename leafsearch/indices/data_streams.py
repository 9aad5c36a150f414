"""Data streams: an append-only name over hidden backing indices `.ds-<name>-<yyyy.MM.dd>-<gen>`.

A stream is created by a write (or `PUT /_data_stream/<name>`) to a name that a composable
template with `data_stream: {}` matches. Its table is `<data>/data_streams.json`, replaced whole
under `Node.lock`, after the backing index it names exists (a crash in between leaves a hidden
index no stream names, never a stream naming no index; the next attempt at that generation takes
it). Names resolve through the alias table's
`resolving` view (`AliasTable.set_streams`): a stream reads as an alias of all its backing
indices whose write index is the newest, so searches, PIT, scroll and writes take a stream where
they take an alias. Writes must be `create`s (`check_write`) and carry an `@timestamp`
(`Index.parse`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import write_private
from leafsearch.common.settings import parse_index_settings
from leafsearch.errors import IllegalArgument, IndexNotFound, ResourceAlreadyExists
from leafsearch.index.index import TIMESTAMP, apply_mapping_limits
from leafsearch.index.mapping import Mapping as IndexMapping
from leafsearch.index.mapping import _wildcard as simple_match
from leafsearch.indices.aliases import AliasMetadata
from leafsearch.indices.templates import creation_body
from leafsearch.unsupported import NotSupported

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.indices.owner import IndicesOwner
    from leafsearch.indices.templates import Resolved


@dataclass(frozen=True, slots=True)
class DataStream:
    name: str
    template: str
    #: Backing index names, oldest first; the last is the write index.
    indices: tuple[str, ...]
    generation: int
    hidden: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "indices": list(self.indices),
            "generation": self.generation,
            "hidden": self.hidden,
        }


class DataStreams:
    """The node's data streams; `current` is replaced whole under `Node.lock`."""

    def __init__(self, path: Path, indices: Mapping[str, Index]) -> None:
        self.path = path
        self.current: dict[str, DataStream] = {}
        self.version = 0
        #: Called with the table's bytes before a change is written, when coordinators share it
        #: (node/cluster_sync.py); returns the table as published (merged with another's change).
        self.shared: Callable[[bytes], bytes] | None = None
        if path.exists():
            self.current = _streams(path.read_bytes(), indices)

    def as_aliases(self) -> dict[str, dict[str, AliasMetadata]]:
        return {
            name: {
                index: AliasMetadata(
                    is_write_index=index == stream.indices[-1], is_hidden=stream.hidden or None
                )
                for index in stream.indices
            }
            for name, stream in self.current.items()
        }

    def publish(self, streams: dict[str, DataStream], indices: Mapping[str, Index]) -> None:
        data = orjson.dumps({name: stream.to_json() for name, stream in streams.items()})
        self.adopt(data if self.shared is None else self.shared(data), indices)

    def adopt(self, data: bytes, indices: Mapping[str, Index]) -> None:
        """Write the table `data` (a change made here, or another coordinator's) and take it."""
        write_private(self.path, data)
        self.current = _streams(data, indices)
        self.version += 1

    def stream_of(self, index: str) -> DataStream | None:
        for stream in self.current.values():
            if index in stream.indices:
                return stream
        return None

    def state_section(self) -> dict[str, Any]:
        return {
            "data_stream": {
                name: {
                    "name": name,
                    "timestamp_field": {"name": TIMESTAMP},
                    "indices": list(stream.indices),
                    "generation": stream.generation,
                    "hidden": stream.hidden,
                    "system": False,
                    "replicated": False,
                    "allow_custom_routing": False,
                }
                for name, stream in sorted(self.current.items())
            },
            "data_stream_aliases": {},
        }


def _streams(data: bytes, indices: Mapping[str, Index]) -> dict[str, DataStream]:
    """The streams written as `data`, each with the backing indices this node has."""
    streams = {}
    for name, body in orjson.loads(data).items():
        backing = tuple(i for i in body["indices"] if i in indices)
        if backing:
            hidden = body.get("hidden", False)
            streams[name] = DataStream(name, body["template"], backing, body["generation"], hidden)
    return streams


def _publish(node: IndicesOwner, streams: dict[str, DataStream]) -> None:
    node.data_streams.publish(streams, node.indices)
    node.aliases.set_streams(node.data_streams.as_aliases())


def backing_index_name(name: str, generation: int, now_ms: int | None = None) -> str:
    millis = int(time.time() * 1000) if now_ms is None else now_ms
    day = time.strftime("%Y.%m.%d", time.gmtime(millis / 1000))
    return f".ds-{name}-{day}-{generation:06d}"


def _template_for(node: IndicesOwner, name: str) -> Resolved:
    resolved = node.templates.resolve(name)
    if resolved.template is None:
        raise IllegalArgument(f"no matching index template found for data stream [{name}]")
    if resolved.data_stream is None:
        raise IllegalArgument(
            f"matching index template [{resolved.template}] for data stream [{name}] has no data stream "
            "template"
        )
    return resolved


def _new_backing_index(node: IndicesOwner, stream: str, resolved: Resolved, generation: int) -> Index:
    """Create the backing index of `generation` from the stream's template: its settings and
    mappings, hidden, with `@timestamp` a `date` unless the template maps it otherwise."""
    name = backing_index_name(stream, generation)
    body = creation_body(resolved, None)
    settings = parse_index_settings(body.get("settings"))
    settings["index.hidden"] = "true"
    mappings = dict(body.get("mappings") or {})
    properties = dict(mappings.get("properties") or {})
    properties.setdefault(TIMESTAMP, {"type": "date"})
    if properties[TIMESTAMP].get("type") not in ("date", "date_nanos"):
        raise IllegalArgument(
            f"data stream timestamp field [{TIMESTAMP}] is of type [{properties[TIMESTAMP].get('type')}], "
            "but [date,date_nanos] is expected"
        )
    mappings["properties"] = properties
    mapping = IndexMapping.from_body(mappings)
    apply_mapping_limits(mapping, settings)
    existing = node.indices.get(name)
    if existing is not None:
        orphan = existing.data_stream == stream and node.data_streams.stream_of(name) is None
        if orphan and not existing.closed and existing.doc_count() == 0:
            return existing  # made for this generation by a creation a crash cut short
        raise ResourceAlreadyExists(f"index [{name}/{existing.uuid}] already exists")
    return node.create_index(name, settings, mapping, data_stream=stream)


def validate_stream_name(name: str) -> None:
    from leafsearch.indices.admin import validate_index_name

    if name != name.lower():
        raise IllegalArgument(f"data_stream [{name}] must be lowercase")
    if name.startswith((".ds-", "-", "_", "+")):
        raise IllegalArgument(f"data_stream [{name}] must not start with '.ds-', '-', '_' or '+'")
    validate_index_name(name)


def create_data_stream(node: IndicesOwner, name: str) -> Index:
    """A new stream and its first backing index; the caller may hold `Node.lock`."""
    validate_stream_name(name)
    with node.lock:
        if name in node.data_streams.current:
            raise ResourceAlreadyExists(f"data_stream [{name}] already exists")
        if name in node.indices or name in node.aliases.current:
            raise ResourceAlreadyExists(f"data_stream [{name}] conflicts with index or alias [{name}]")
        resolved = _template_for(node, name)
        index = _new_backing_index(node, name, resolved, 1)
        hidden = bool((resolved.data_stream or {}).get("hidden"))
        stream = DataStream(name, resolved.template or "", (index.name,), 1, hidden)
        _publish(node, {**node.data_streams.current, name: stream})
        return index


def auto_create(node: IndicesOwner, name: str) -> Index:
    """The write index of the stream a write names, created if another write has not already."""
    with node.lock:
        stream = node.data_streams.current.get(name)
        if stream is not None:
            return node.indices[stream.indices[-1]]
        return create_data_stream(node, name)


def rollover(node: IndicesOwner, name: str, body: Any, *, dry_run: bool = False) -> dict[str, Any]:
    """A new write index of the next generation (conditions, if given, are taken as met only
    when the write index's documents reach `max_docs`)."""
    conditions = {}
    if body:
        if not isinstance(body, Mapping):
            raise IllegalArgument("request body must be an object")
        for key in body:
            if key not in ("conditions", "settings", "mappings", "aliases"):
                raise IllegalArgument(f"unknown field [{key}]")
        conditions = dict(body.get("conditions") or {})
    with node.lock:
        stream = node.data_streams.current.get(name)
        if stream is None and name in node.aliases.current:
            raise NotSupported(f"[_rollover] of alias [{name}]", "only data streams roll over")
        if stream is None:
            raise IllegalArgument(f"rollover target [{name}] does not exist")
        old = stream.indices[-1]
        met: dict[str, bool] = {}
        for key, value in conditions.items():
            if key == "max_docs":
                met[f"[max_docs: {value}]"] = node.indices[old].doc_count() >= int(value)
            else:
                met[f"[{key}: {value}]"] = False
        rolled = not conditions or any(met.values())
        new_name = backing_index_name(name, stream.generation + 1)
        if rolled and not dry_run:
            resolved = _template_for(node, name)
            index = _new_backing_index(node, name, resolved, stream.generation + 1)
            new_name = index.name
            updated = DataStream(
                name, stream.template, (*stream.indices, index.name), stream.generation + 1, stream.hidden
            )
            _publish(node, {**node.data_streams.current, name: updated})
    return {
        "acknowledged": rolled and not dry_run,
        "shards_acknowledged": rolled and not dry_run,
        "old_index": old,
        "new_index": new_name,
        "rolled_over": rolled and not dry_run,
        "dry_run": dry_run,
        "lazy": False,
        "conditions": met,
    }


def _matching(node: IndicesOwner, expr: str | None, *, missing_ok: bool) -> list[str]:
    streams = node.data_streams.current
    if not expr or expr == "_all":
        return sorted(streams)
    out: set[str] = set()
    for term in expr.split(","):
        if "*" in term:
            out.update(n for n in streams if simple_match(term).fullmatch(n))
        elif term in streams:
            out.add(term)
        elif not missing_ok:
            raise IndexNotFound(term)
    return sorted(out)


def get_data_streams(node: IndicesOwner, expr: str | None) -> dict[str, Any]:
    from leafsearch.indices.admin import index_health

    body = []
    for name in _matching(node, expr, missing_ok=False):
        stream = node.data_streams.current[name]
        indices = [node.indices[i] for i in stream.indices if i in node.indices]
        statuses = [index_health(index) for index in indices]
        status = "red" if "red" in statuses else "yellow" if "yellow" in statuses else "green"
        body.append(
            {
                "name": name,
                "timestamp_field": {"name": TIMESTAMP},
                "indices": [
                    {
                        "index_name": i.name,
                        "index_uuid": i.uuid,
                        "prefer_ilm": True,
                        "managed_by": "Unmanaged",
                    }
                    for i in indices
                ],
                "generation": stream.generation,
                "status": status.upper(),
                "template": stream.template,
                "hidden": stream.hidden,
                "system": False,
                "allow_custom_routing": False,
                "replicated": False,
                "rollover_on_write": False,
                "prefer_ilm": True,
                "next_generation_managed_by": "Unmanaged",
            }
        )
    return {"data_streams": body}


def delete_data_streams(node: IndicesOwner, expr: str) -> dict[str, Any]:
    """Delete streams and their backing indices; a missing explicit name is a 404, a wildcard
    reaching none is fine."""
    with node.lock:
        names = _matching(node, expr, missing_ok=False)
        if not names:
            return {"acknowledged": True}
        streams = dict(node.data_streams.current)
        doomed = [i for name in names for i in streams.pop(name).indices]
        # The stream goes first: no search resolves it to an index being dropped. A crash in
        # between leaves hidden indices that no stream names (and none takes: they hold documents).
        _publish(node, streams)
        for index in doomed:
            if index in node.indices:
                node.drop_index(index)
    return {"acknowledged": True}


def restore(node: IndicesOwner, name: str, stored: Mapping[str, Any], indices: list[str]) -> None:
    """A stream of a snapshot back, over its restored backing indices (the caller holds
    `Node.lock` and has checked that the name is free)."""
    stream = DataStream(
        name, stored["template"], tuple(indices), stored["generation"], stored.get("hidden", False)
    )
    _publish(node, {**node.data_streams.current, name: stream})


def drop_backing(node: IndicesOwner, indices: list[str]) -> None:
    """Take backing indices about to be deleted (never a write index) out of their streams."""
    gone = set(indices)
    streams = {
        name: DataStream(
            name, s.template, tuple(i for i in s.indices if i not in gone), s.generation, s.hidden
        )
        for name, s in node.data_streams.current.items()
    }
    _publish(node, streams)


def data_stream_stats(node: IndicesOwner, expr: str | None) -> dict[str, Any]:
    names = _matching(node, expr, missing_ok=True)
    streams = []
    total_bytes = 0
    backing = 0
    for name in names:
        stream = node.data_streams.current[name]
        indices = [node.indices[i] for i in stream.indices if i in node.indices]
        size = sum(i.store_size_bytes() for i in indices if not i.closed)
        total_bytes += size
        backing += len(indices)
        streams.append(
            {
                "data_stream": name,
                "backing_indices": len(indices),
                "store_size_bytes": size,
                "maximum_timestamp": _max_timestamp(node, indices),
            }
        )
    shards = sum(
        i.num_shards
        for s in names
        for i in (node.indices.get(x) for x in node.data_streams.current[s].indices)
        if i
    )
    return {
        "_shards": {"total": shards, "successful": shards, "failed": 0},
        "data_stream_count": len(names),
        "backing_indices": backing,
        "total_store_size_bytes": total_bytes,
        "data_streams": streams,
    }


def _max_timestamp(node: IndicesOwner, indices: list[Index]) -> int:
    from leafsearch.request.search_request import parse_search_request

    open_names = [i.name for i in indices if not i.closed]
    if not open_names:
        return 0
    request = parse_search_request(
        {"size": 0, "aggs": {"m": {"max": {"field": TIMESTAMP}}}}, {}, indices=",".join(open_names)
    )
    value = node.search(request)["aggregations"]["m"]["value"]
    return int(value) if value is not None else 0
