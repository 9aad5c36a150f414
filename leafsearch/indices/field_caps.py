"""`_field_caps`: what each field is, and whether it can be searched and aggregated, per index.

Each index gives its capabilities per field (its leaf fields and multi-fields, the objects above
them, the metadata fields); the response merges them by field and type as Elasticsearch's
`FieldCapabilities.Builder` does: one entry per type, `indices` listed only when a field has more
than one type, `non_searchable_indices` / `non_aggregatable_indices` only when the indices of one
type disagree, and with `include_unmapped` an `unmapped` entry for the indices that lack the field.

`index_filter` keeps the indices where the filter matches a document (a count on the current
snapshot); Elasticsearch's can-match phase may keep some indices where nothing matches, never
fewer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.errors import IllegalArgument
from leafsearch.request.search_request import parse_count_request

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.mapping import FieldType, ObjectMapper
    from leafsearch.indices.owner import IndicesOwner

#: Elasticsearch 8's metadata fields a document of leafsearch has: (type, searchable, aggregatable).
METADATA_FIELDS = {
    "_id": (True, False),
    "_ignored": (True, True),
    "_index": (True, True),
    "_routing": (True, False),
    "_seq_no": (True, True),
    "_source": (False, False),
    "_version": (False, True),
}
_FILTERS = frozenset({"+metadata", "-metadata", "-nested", "-multifield", "parent", "-parent"})


@dataclass(frozen=True, slots=True)
class Capability:
    """One field in one index."""

    type: str
    metadata_field: bool
    searchable: bool
    aggregatable: bool
    meta: tuple[tuple[str, str], ...] = ()


def check_filters(filters: list[str]) -> None:
    for name in filters:
        if name not in _FILTERS:
            raise IllegalArgument(f"Unknown field caps filter [{name}]")


def index_capabilities(
    index: Index, patterns: list[str], filters: list[str], types: list[str]
) -> dict[str, Capability]:
    """`FieldCapabilitiesFetcher.retrieveFieldCaps` for one index's mapping."""
    mapping = index.mapping
    objects = dict(_objects(mapping.root))
    multi_fields = {sub.path for field in mapping.fields().values() for sub in field.subfields}
    found: dict[str, Capability] = {}

    names = _name_pattern(patterns)

    def wanted(name: str, capability: Capability) -> bool:
        if not names.fullmatch(name):
            return False
        if types and capability.type not in types:
            return False
        if "+metadata" in filters and not capability.metadata_field:
            return False
        if "-metadata" in filters and capability.metadata_field:
            return False
        if "-multifield" in filters and name in multi_fields:
            return False
        return not ("-nested" in filters and any(objects.get(p) == "nested" for p in _parents(name)))

    for name, (searchable, aggregatable) in METADATA_FIELDS.items():
        capability = Capability(name, True, searchable, aggregatable)
        if wanted(name, capability):
            found[name] = capability
    for name, field in mapping.fields().items():
        capability = _leaf(field)
        if not wanted(name, capability):
            continue
        found[name] = capability
        if "-parent" in filters:
            continue
        for parent in _parents(name):
            if parent in found:
                break
            if parent in objects:
                found[parent] = Capability(objects[parent], False, False, False)
    return found


def _name_pattern(patterns: list[str]) -> re.Pattern[str]:
    """Elasticsearch's `Regex.simpleMatch`: `*` is the only wildcard."""
    return re.compile("|".join(".*".join(map(re.escape, p.split("*"))) for p in patterns))


def _leaf(field: FieldType) -> Capability:
    aggregatable = field.doc_values or (field.type == "text" and bool(field.params.get("fielddata")))
    meta = field.params.get("meta") or {}
    return Capability(field.type, False, bool(field.index), bool(aggregatable), tuple(sorted(meta.items())))


def _objects(mapper: ObjectMapper) -> Iterator[tuple[str, str]]:
    for child in mapper.children.values():
        if not child.leaf:
            yield child.path, child.type
            yield from _objects(child)


def _parents(name: str) -> Iterator[str]:
    while "." in name:
        name = name.rpartition(".")[0]
        yield name


def matching_indices(
    node: IndicesOwner, indices: Iterable[Index], index_filter: dict[str, Any] | None
) -> list[Index]:
    """The indices where `index_filter` matches a document (all of them without a filter)."""
    if index_filter is None:
        return list(indices)
    body = {"query": index_filter}
    return [
        index
        for index in indices
        if node.count(parse_count_request(body, {}, indices=index.name))["count"] > 0
    ]


def merge(per_index: dict[str, dict[str, Capability]], include_unmapped: bool) -> dict[str, Any]:
    """The response: `indices` and `fields` -> type -> capabilities, merged over the indices."""
    names = sorted(per_index)
    by_field: dict[str, dict[str, list[tuple[str, Capability]]]] = {}
    for index_name in names:
        for field, capability in per_index[index_name].items():
            by_field.setdefault(field, {}).setdefault(capability.type, []).append((index_name, capability))
    fields: dict[str, Any] = {}
    for field in sorted(by_field):
        types = by_field[field]
        if include_unmapped:
            mapped = {index_name for entries in types.values() for index_name, _ in entries}
            missing = [n for n in names if n not in mapped]
            if missing:
                unmapped = Capability("unmapped", False, False, False)
                types = {**types, "unmapped": [(n, unmapped) for n in missing]}
        fields[field] = {type_: _merged(type_, entries, len(types) > 1) for type_, entries in types.items()}
    return {"indices": names, "fields": fields}


def _merged(type_: str, entries: list[tuple[str, Capability]], with_indices: bool) -> dict[str, Any]:
    searchable = [name for name, c in entries if c.searchable]
    aggregatable = [name for name, c in entries if c.aggregatable]
    body: dict[str, Any] = {
        "type": type_,
        "metadata_field": any(c.metadata_field for _, c in entries),
        "searchable": len(searchable) == len(entries),
        "aggregatable": len(aggregatable) == len(entries),
    }
    if with_indices:
        body["indices"] = [name for name, _ in entries]
    if searchable and len(searchable) < len(entries):
        body["non_searchable_indices"] = [name for name, c in entries if not c.searchable]
    if aggregatable and len(aggregatable) < len(entries):
        body["non_aggregatable_indices"] = [name for name, c in entries if not c.aggregatable]
    meta: dict[str, set[str]] = {}
    for _, capability in entries:
        for key, value in capability.meta:
            meta.setdefault(key, set()).add(value)
    if meta:
        body["meta"] = {key: sorted(values) for key, values in sorted(meta.items())}
    return body
