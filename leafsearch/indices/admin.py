"""Index administration: names, index expressions, create/delete/get, mappings, settings, health.

These are the rules Elasticsearch applies before an index changes, with its exact refusals, kept
apart from the engine so the REST layer and in-process callers share them. Functions take typed
arguments; the REST layer parses query parameters.
"""

from __future__ import annotations

import contextlib
import fnmatch
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.common.settings import (
    FINAL_INDEX_SETTINGS,
    AutoCreate,
    check_active_shard_count,
    index_defaults,
    index_setting,
    is_dynamic_index_setting,
    nest,
    parse_index_settings,
)
from leafsearch.errors import (
    ActionRequestValidation,
    IllegalArgument,
    IndexClosed,
    IndexNotFound,
    InvalidIndexName,
    ParseException,
    ResourceAlreadyExists,
    ShardUnavailable,
)
from leafsearch.index.analyzers import analysis_of
from leafsearch.index.index import apply_mapping_limits
from leafsearch.index.index_sort import check_sort_settings, index_sort_of
from leafsearch.index.mapping import Mapping as IndexMapping
from leafsearch.index.mapping import _wildcard as simple_match
from leafsearch.index.shard_listing import CopyListing
from leafsearch.indices.templates import creation_body
from leafsearch.request.indices_options import IndicesOptions

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.indices.owner import IndicesOwner

MAX_INDEX_NAME_BYTES = 255
# Java's Set.toString order of Strings.INVALID_FILENAME_CHARS, as it appears in Elasticsearch's message.
_INVALID_CHARS_TEXT = '[ , ", *, \\, <, |, ,, >, /, ?]'
_INVALID_CHARS = frozenset('\\/*?"<>| ,')
# `index.version.created` of an index created by Elasticsearch 8.17.0.
INDEX_VERSION_CREATED = "8518000"
_WILDCARD_STATES = frozenset({"open", "closed", "hidden", "none", "all"})


# ---------------------------------------------------------------------------------------------
# names and expressions


def validate_index_name(name: str) -> None:
    """Refuse a name Elasticsearch would refuse, in its order of checks and with its reasons, and
    a name holding NUL, which Elasticsearch takes."""
    if any(c in _INVALID_CHARS for c in name):
        raise InvalidIndexName(name, f"must not contain the following characters {_INVALID_CHARS_TEXT}")
    if "\0" in name:
        # leafsearch's own rule (docs/differences.md): names go into numpy string arrays (the
        # `_index` field), which drop trailing NULs, so `a` and `a\0` would count as one index.
        raise InvalidIndexName(name, "must not contain the NUL character ['\\u0000']")
    if not name:
        raise InvalidIndexName(name, "must not be empty")
    if "#" in name:
        raise InvalidIndexName(name, "must not contain '#'")
    if ":" in name:
        raise InvalidIndexName(name, "must not contain ':'")
    if name[0] in "_-+":
        raise InvalidIndexName(name, "must not start with '_', '-', or '+'")
    size = len(name.encode())
    if size > MAX_INDEX_NAME_BYTES:
        raise InvalidIndexName(name, f"index name is too long, ({size} > {MAX_INDEX_NAME_BYTES})")
    if name in (".", ".."):
        raise InvalidIndexName(name, "must not be '.' or '..'")
    if name.lower() != name:
        raise InvalidIndexName(name, "must be lowercase")


def _is_hidden(index: Any) -> bool:
    return getattr(index, "settings", {}).get("index.hidden") == "true"


def _is_closed(index: Any) -> bool:
    return getattr(index, "closed", False)


def _wildcard_states(expand_wildcards: str) -> set[str]:
    states: set[str] = set()
    for state in expand_wildcards.split(","):
        state = state.strip()
        if state not in _WILDCARD_STATES:
            raise IllegalArgument(f"No valid expand wildcard value [{state}]")
        if state == "all":
            states |= {"open", "closed", "hidden"}
        elif state != "none":
            states.add(state)
    return states


def resolve_index_expression(
    indices: Mapping[str, Any],
    expr: str | None,
    *,
    ignore_unavailable: bool = False,
    allow_no_indices: bool = True,
    expand_wildcards: str = "open",
    aliases: Mapping[str, Mapping[str, Any]] | None = None,
    forbid_closed: bool = False,
) -> list[str]:
    """Concrete index names for an expression: comma lists, wildcards, `_all`, `-exclusions`,
    alias names (their indices)."""
    names = resolve_names(
        indices,
        expr,
        ignore_unavailable=ignore_unavailable,
        allow_no_indices=allow_no_indices,
        expand_wildcards=expand_wildcards,
        aliases=aliases,
        forbid_closed=forbid_closed,
    )
    if not aliases:
        return names
    concrete: dict[str, None] = {}
    for name in names:
        concrete.update(dict.fromkeys(sorted(aliases[name]) if name in aliases else [name]))
    return list(concrete)


def resolve_names(
    indices: Mapping[str, Any],
    expr: str | None,
    *,
    ignore_unavailable: bool = False,
    allow_no_indices: bool = True,
    expand_wildcards: str = "open",
    aliases: Mapping[str, Mapping[str, Any]] | None = None,
    forbid_closed: bool = False,
) -> list[str]:
    """The index and alias names an expression means, before aliases become their indices (a
    search needs to know which alias reached an index: its filter and routing apply).

    As Elasticsearch: a `-name` term excludes only after a wildcard term appeared (before one, it
    is a literal name); a missing concrete name is a 404 unless `ignore_unavailable`; a wildcard
    matching nothing is an error only when `allow_no_indices` is false. Wildcards match open
    indices with `open`, closed ones with `closed`, and alias names with `open` (hidden aliases
    only with `expand_wildcards=hidden` or a leading dot); `forbid_closed` (APIs that read or
    write documents) drops closed indices from wildcards and refuses a named one
    (`index_closed_exception`) unless `ignore_unavailable`.
    """
    states = _wildcard_states(expand_wildcards)
    aliases = aliases or {}
    terms = [t for t in (expr or "").split(",") if t] or ["_all"]
    resolved: dict[str, None] = {}
    wildcard_seen = False

    def visible(name: str, hidden: bool, pattern: str) -> bool:
        return not hidden or "hidden" in states or (pattern.startswith(".") and name.startswith("."))

    def expand(pattern: str) -> list[str]:
        indices_matched = [
            name
            for name, index in sorted(indices.items())
            if fnmatch.fnmatchcase(name, pattern)
            and (("closed" in states and not forbid_closed) if _is_closed(index) else "open" in states)
            and visible(name, _is_hidden(index), pattern)
        ]
        if "open" not in states:
            return indices_matched
        return indices_matched + [
            name
            for name, members in sorted(aliases.items())
            if fnmatch.fnmatchcase(name, pattern)
            and visible(name, any(m.is_hidden for m in members.values()), pattern)
        ]

    for term in terms:
        if term.startswith("-") and wildcard_seen:
            pattern = term[1:]
            for name in [n for n in resolved if fnmatch.fnmatchcase(n, pattern)]:
                del resolved[name]
            continue
        if term in ("_all", "*") or "*" in term:
            wildcard_seen = True
            matches = expand("*" if term == "_all" else term)
            if not matches and not allow_no_indices:
                raise IndexNotFound(term)
            resolved.update(dict.fromkeys(matches))
        elif term in indices or term in aliases:
            index = indices.get(term)
            if index is not None and forbid_closed and _is_closed(index):
                if ignore_unavailable:
                    continue
                raise IndexClosed(term, index.uuid)
            resolved[term] = None
        elif not ignore_unavailable:
            raise IndexNotFound(term)
    if not resolved and not allow_no_indices:
        raise IndexNotFound(expr or "_all")
    return list(resolved)


def indices_of(node: IndicesOwner, options: IndicesOptions, expr: str | None) -> list[Index]:
    """The open (or, as `options` allow, closed) indices an expression names, aliases resolved."""
    with node.lock:
        names = node.resolve_indices(
            expr,
            ignore_unavailable=options.ignore_unavailable,
            allow_no_indices=options.allow_no_indices,
            expand_wildcards=options.expand_wildcards,
            forbid_closed=options.forbid_closed,
        )
        return [node.indices[name] for name in names]


# ---------------------------------------------------------------------------------------------
# create, delete, get


def create_index(
    node: IndicesOwner,
    name: str,
    body: Mapping[str, Any] | None,
    *,
    wait_for_active_shards: int | str | None = None,
) -> dict[str, Any]:
    validate_index_name(name)
    body = body or {}
    for key in body:
        if key not in ("settings", "mappings", "aliases"):
            raise ParseException(f"unknown key [{key}] for create index")
    if name in node.data_streams.current:
        raise ResourceAlreadyExists(f"data stream [{name}] already exists")
    hidden = str(parse_index_settings(body.get("settings")).get("index.hidden", "false")).lower() == "true"
    resolved = node.templates.resolve(name, hidden=hidden)
    if resolved.data_stream is not None:
        raise IllegalArgument(
            f"cannot create index with name [{name}], because it matches with template [{resolved.template}] "
            "that creates data streams only, use create data stream api instead"
        )
    body = creation_body(resolved, body)
    from leafsearch.indices.aliases import (  # aliases.py imports this
        InvalidAliasName,
        creation_aliases,
        with_index,
    )

    aliases = creation_aliases(body["aliases"]) if "aliases" in body else {}
    settings = parse_index_settings(body.get("settings"))
    if wait_for_active_shards is None:
        wait_for_active_shards = index_setting(settings, "index.write.wait_for_active_shards")
    check_active_shard_count(wait_for_active_shards, index_setting(settings, "index.number_of_replicas"))
    check_sort_settings(settings)
    mapping = IndexMapping.from_body(body.get("mappings"), analysis_of(settings))
    apply_mapping_limits(mapping, settings)
    mapping.check_limits()
    index_sort_of(settings, mapping, name)  # refuses sort fields the mapping can not sort by
    with node.lock:
        existing = node.indices.get(name)
        if existing is not None:
            raise _already_exists(existing)
        if name in node.aliases.current:
            raise InvalidIndexName(name, "already exists as alias")
        for alias in aliases:
            if alias in node.indices or alias == name:
                raise InvalidAliasName(
                    alias, "an index or data stream exists with the same name as the alias"
                )
        table = with_index(node.aliases.current, name, aliases) if aliases else None
        node.create_index(name, settings, mapping)
        if table is not None:
            node.aliases.publish(table, node.indices)
    return {"acknowledged": True, "shards_acknowledged": True, "index": name}


def auto_create_index(node: IndicesOwner, name: str) -> Index:
    """The index a write names when it does not exist yet, created as `action.auto_create_index` allows."""
    resolved = node.templates.resolve(name)
    if resolved.allow_auto_create is not True:
        _check_auto_create(node.cluster_settings.get("action.auto_create_index"), name)
    if resolved.allow_auto_create is False:
        raise IndexNotFound(
            name, suffix=f" and [allow_auto_create] is [false] in template [{resolved.template}]"
        )
    if resolved.data_stream is not None:
        from leafsearch.indices import data_streams  # data_streams.py imports this module

        return data_streams.auto_create(node, name)
    validate_index_name(name)
    with node.lock:
        existing = node.indices.get(name)
        if existing is not None:
            return existing
        if not (resolved.settings or resolved.mappings or resolved.aliases):
            return node.create_index(name, {}, IndexMapping.from_body(None))
    with contextlib.suppress(ResourceAlreadyExists):  # another write created it meanwhile
        create_index(node, name, None)
    return node.indices[name]


def _check_auto_create(auto: AutoCreate, name: str) -> None:
    """Elasticsearch's `AutoCreateIndex.shouldAutoCreate`: the first matching pattern decides."""
    if not auto.enabled:
        raise IndexNotFound(name, suffix=" and [action.auto_create_index] is [false]")
    for pattern, include in auto.expressions:
        if simple_match(pattern).fullmatch(name):
            if include:
                return
            raise IndexNotFound(
                name,
                suffix=f" and [action.auto_create_index] contains [-{pattern}] which forbids automatic "
                "creation of the index",
            )
    if auto.expressions:
        raise IndexNotFound(name, suffix=f" and [action.auto_create_index] ([{auto.text}]) doesn't match")


def _already_exists(index: Index) -> ResourceAlreadyExists:
    return ResourceAlreadyExists(
        f"index [{index.name}/{index.uuid}] already exists",
        extra={"index_uuid": index.uuid, "index": index.name},
    )


def check_destructive(node: IndicesOwner, expr: str) -> None:
    """`action.destructive_requires_name`: deleting or closing needs the indices' names."""
    if node.cluster_settings.get("action.destructive_requires_name"):
        terms = [t for t in expr.split(",") if t]
        if not terms or any(t == "_all" or "*" in t for t in terms):
            raise IllegalArgument("Wildcard expressions or all indices are not allowed")


def delete_indices(node: IndicesOwner, expr: str, options: IndicesOptions) -> dict[str, Any]:
    check_destructive(node, expr)
    with node.lock:
        names = concrete_only(node, expr, options)
        streams = node.data_streams
        for name in names:
            stream = streams.stream_of(name)
            if stream is not None and stream.indices[-1] == name:
                raise IllegalArgument(
                    f"index [{name}] is the write index for data stream [{stream.name}] and cannot be deleted"
                )
        if any(streams.stream_of(name) for name in names):
            from leafsearch.indices import data_streams  # data_streams.py imports this module

            data_streams.drop_backing(node, names)
        for name in names:
            node.drop_index(name)
    return {"acknowledged": True}


def concrete_only(node: IndicesOwner, expr: str | None, options: IndicesOptions) -> list[str]:
    """The indices a destructive expression names, where aliases do not count: wildcards skip
    them and naming one is refused, as Elasticsearch refuses deleting an index by its alias."""
    for term in (expr or "").split(","):
        if term in node.aliases.current and term not in node.indices:
            raise IllegalArgument(
                f"The provided expression [{term}] matches an alias, specify the corresponding concrete "
                "indices instead."
            )
    return resolve_index_expression(
        node.indices,
        expr,
        ignore_unavailable=options.ignore_unavailable,
        allow_no_indices=options.allow_no_indices,
        expand_wildcards=options.expand_wildcards,
    )


def get_indices(
    node: IndicesOwner,
    expr: str,
    options: IndicesOptions,
    *,
    shown: Callable[[str], bool],
    flat: bool = False,
    include_defaults: bool = False,
) -> dict[str, Any]:
    """`GET /<index>`: each index's aliases (those `shown` names: the caller's), mappings, settings."""
    result: dict[str, Any] = {}
    for index in indices_of(node, options, expr):
        aliases = node.aliases.of_index(index.name)
        entry: dict[str, Any] = {
            "aliases": {alias: meta.to_body() for alias, meta in aliases.items() if shown(alias)},
            "mappings": index.mapping.to_body(),
            "settings": _shape(index_settings(index), flat),
        }
        if include_defaults:
            entry["defaults"] = _shape(_unset_defaults(index), flat)
        result[index.name] = entry
    return result


def index_settings(index: Index) -> dict[str, Any]:
    """Flat settings of an index as `GET <index>/_settings` shows them, including the node-set ones."""
    flat = dict(index.settings)
    flat.setdefault("index.number_of_shards", str(index.num_shards))
    flat.setdefault("index.number_of_replicas", "1")
    flat.update(
        {
            "index.uuid": index.uuid,
            "index.creation_date": str(index.creation_date),
            "index.provided_name": index.name,
            "index.version.created": INDEX_VERSION_CREATED,
            "index.routing.allocation.include._tier_preference": "data_content",
        }
    )
    return flat


def _unset_defaults(index: Index) -> dict[str, Any]:
    current = index_settings(index)
    return {k: v for k, v in index_defaults().items() if k not in current}


def _shape(flat: dict[str, Any], as_flat: bool) -> dict[str, Any]:
    return dict(sorted(flat.items())) if as_flat else nest(flat)


# ---------------------------------------------------------------------------------------------
# mappings and settings


def get_mappings(node: IndicesOwner, expr: str | None, options: IndicesOptions) -> dict[str, Any]:
    return {index.name: {"mappings": index.mapping.to_body()} for index in indices_of(node, options, expr)}


def put_mapping(
    node: IndicesOwner, expr: str | None, body: Mapping[str, Any] | None, options: IndicesOptions
) -> dict:
    if not body:
        raise ActionRequestValidation("mapping source is required")
    if len(body) == 1 and "_doc" in body:  # RestPutMappingAction: a typed body is refused in 8.x
        raise IllegalArgument("Types cannot be provided in put mapping requests")
    for index in indices_of(node, options, expr):
        with index.lock:
            index.mapping.merge(dict(body))
            index.persist_meta()
    return {"acknowledged": True}


def get_settings(
    node: IndicesOwner,
    expr: str | None,
    options: IndicesOptions,
    *,
    names: str | None = None,
    flat: bool = False,
    include_defaults: bool = False,
) -> dict[str, Any]:
    patterns = [p for p in (names or "").split(",") if p and p != "_all"]

    def keep(settings: dict[str, Any]) -> dict[str, Any]:
        if not patterns:
            return settings
        return {k: v for k, v in settings.items() if any(fnmatch.fnmatchcase(k, p) for p in patterns)}

    result: dict[str, Any] = {}
    for index in indices_of(node, options, expr):
        settings = keep(index_settings(index))
        defaults = keep(_unset_defaults(index)) if include_defaults else {}
        if not settings and not defaults:
            continue
        entry = {"settings": _shape(settings, flat)}
        if include_defaults:
            entry["defaults"] = _shape(defaults, flat)
        result[index.name] = entry
    return result


def put_settings(
    node: IndicesOwner,
    expr: str | None,
    body: Mapping[str, Any] | None,
    options: IndicesOptions,
    *,
    preserve_existing: bool = False,
) -> dict:
    """`PUT <index>/_settings`: the body may wrap the settings in `settings`, as Elasticsearch allows.
    `preserve_existing`: an index keeps the settings it already has; only the others are set."""
    if not isinstance(body, Mapping):
        raise ActionRequestValidation("no settings to update")
    inner = body.get("settings")
    updates = parse_index_settings(inner if isinstance(inner, Mapping) else body, for_update=True)
    if not updates:
        raise ActionRequestValidation("no settings to update")
    targets = indices_of(node, options, expr)
    static = sorted(k for k in updates if not is_dynamic_index_setting(k))
    open_targets = [i for i in targets if not i.closed]
    if static and open_targets:  # a closed index takes static settings (analysis), used when opened
        opened = ", ".join(f"[{i.name}/{i.uuid}]" for i in open_targets)
        raise IllegalArgument(
            f"Can't update non dynamic settings [[{', '.join(static)}]] for open indices [{opened}]"
        )
    final = [k for k in static if k in FINAL_INDEX_SETTINGS or k.startswith("index.sort.")]
    if final and targets:
        raise IllegalArgument(f"final index setting [{final[0]}], not updateable")
    for index in targets:
        if preserve_existing:
            index.update_settings({k: v for k, v in updates.items() if k not in index.settings})
        else:
            index.update_settings(updates)
    return {"acknowledged": True}


# ---------------------------------------------------------------------------------------------
# refresh, flush, health, cat


def _replicas(index: Index) -> int:
    return int(index_setting(index.settings, "index.number_of_replicas"))


def shards_header(indices: list[Index]) -> dict[str, int]:
    """`_shards` of a broadcast action on one node: replicas count in `total`, never succeed."""
    primaries = sum(i.num_shards for i in indices)
    total = sum(i.num_shards * (1 + _replicas(i)) for i in indices)
    return {"total": total, "successful": primaries, "failed": 0}


def refresh(node: IndicesOwner, expr: str | None, options: IndicesOptions) -> dict[str, Any]:
    targets = indices_of(node, options, expr)
    for index in targets:
        index.refresh()
    return {"_shards": shards_header(targets)}


def flush(node: IndicesOwner, expr: str | None, options: IndicesOptions) -> dict[str, Any]:
    """Every acknowledged write is already fsynced in the translog; a flush only has to answer."""
    return {"_shards": shards_header(indices_of(node, options, expr))}


def copy_states(index: Index) -> list[CopyListing]:
    """Every copy of the index's shards and its state: a Ray-backed index's as its machines
    answer (ray_backend/remote.py `RemoteIndex.copies`); this node holds every primary of its
    own indices and none of their replicas, as a one-node Elasticsearch does."""
    if index.remote is not None and not index.closed:
        return index.remote.copies(listed=False)
    replicas = _replicas(index)
    copies = []
    for shard_id in range(index.num_shards):
        copies.append(CopyListing(shard_id, True, "STARTED"))
        copies.extend(
            CopyListing(shard_id, False, "UNASSIGNED", reason="INDEX_CREATED") for _ in range(replicas)
        )
    return copies


@dataclass(slots=True)
class _ShardCounts:
    """A shard's copies by state (ClusterShardHealth's counts)."""

    primary_active: bool = False
    active: int = 0
    initializing: int = 0
    unassigned: int = 0

    @property
    def status(self) -> str:
        if not self.primary_active:
            return "red"
        return "yellow" if self.unassigned or self.initializing else "green"


def _shard_counts(index: Index, copies: list[CopyListing]) -> list[_ShardCounts]:
    counts = [_ShardCounts() for _ in range(index.num_shards)]
    for copy in copies:
        shard = counts[copy.shard_id]
        if copy.state == "STARTED":
            shard.active += 1
            shard.primary_active |= copy.primary
        elif copy.state == "INITIALIZING":
            shard.initializing += 1
        else:
            shard.unassigned += 1
    return counts


def index_health(index: Index, inactive: int | None = None) -> str:
    """Red while a primary is not active (`inactive` primaries, when the caller knows them), as
    Elasticsearch's index whose primary has no node; yellow while a replica is unassigned or
    initializing; else green."""
    if inactive:
        return "red"
    counts = _shard_counts(index, copy_states(index))
    return max((c.status for c in counts), key=_HEALTH_ORDER.__getitem__, default="green")


_HEALTH_ORDER = {"green": 0, "yellow": 1, "red": 2}


def cluster_health(
    node: IndicesOwner,
    expr: str | None,
    *,
    level: str = "cluster",
    wait_for_status: str | None = None,
    timeout: float = 30.0,
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body). Named indices and `wait_for_status` are waited for until `timeout`; a
    request that times out answers 408 with `timed_out: true`, as Elasticsearch does. As there,
    a red status alone is not waited out: named indices that exist, without `wait_for_status`,
    answer at once, whatever their health (only a missing one is waited for, as red)."""
    if level not in ("cluster", "indices", "shards"):
        raise IllegalArgument(f"No enum constant org.elasticsearch.action.ClusterStatsLevel.{level.upper()}")
    if wait_for_status is not None and wait_for_status not in _HEALTH_ORDER:
        raise IllegalArgument(f"unknown cluster health status [{wait_for_status}]")
    deadline = time.monotonic() + timeout
    while True:
        body, missing = _health_body(node, expr, level)
        satisfied = not missing and (
            wait_for_status is None or _HEALTH_ORDER[body["status"]] <= _HEALTH_ORDER[wait_for_status]
        )
        if satisfied or time.monotonic() >= deadline:
            body["timed_out"] = not satisfied
            return (408 if not satisfied else 200), body
        time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))


def _health_body(node: IndicesOwner, expr: str | None, level: str) -> tuple[dict[str, Any], bool]:
    """The health body, and whether an index `expr` names is missing (the body then says red)."""
    missing = False
    with node.lock:
        if expr:
            try:
                targets = indices_of(node, IndicesOptions(), expr)
            except IndexNotFound:
                targets, missing = [], True
        else:
            targets = indices_of(node, IndicesOptions(expand_wildcards="all"), None)
    counts = {i.name: _shard_counts(i, copy_states(i)) for i in targets}
    every = [c for shards in counts.values() for c in shards]
    copies = sum(c.active + c.initializing + c.unassigned for c in every)
    active = sum(c.active for c in every)
    statuses = [c.status for c in every]
    status = "red" if missing else max(statuses, key=_HEALTH_ORDER.__getitem__, default="green")
    body: dict[str, Any] = {
        "cluster_name": node.cluster_name,
        "status": status,
        "timed_out": False,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        **_totals(every),
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": 100.0 * active / copies if copies else 100.0,
    }
    if level != "cluster":
        body["indices"] = {
            i.name: {
                "status": max(
                    (c.status for c in counts[i.name]), key=_HEALTH_ORDER.__getitem__, default="green"
                ),
                "number_of_shards": i.num_shards,
                "number_of_replicas": _replicas(i),
                **_totals(counts[i.name]),
            }
            for i in targets
        }
        if level == "shards":
            for i in targets:
                body["indices"][i.name]["shards"] = {
                    str(shard_id): {
                        "status": c.status,
                        "primary_active": c.primary_active,
                        **_shard_totals(c),
                    }
                    for shard_id, c in enumerate(counts[i.name])
                }
    return body, missing


def _shard_totals(counts: _ShardCounts) -> dict[str, int]:
    totals = _totals([counts])
    del totals["active_primary_shards"]
    return totals


def _totals(counts: list[_ShardCounts]) -> dict[str, int]:
    """The copy counts of a health section, as Elasticsearch prints them."""
    return {
        "active_primary_shards": sum(c.primary_active for c in counts),
        "active_shards": sum(c.active for c in counts),
        "relocating_shards": 0,
        "initializing_shards": sum(c.initializing for c in counts),
        "unassigned_shards": sum(c.unassigned for c in counts),
        "unassigned_primary_shards": sum(not c.primary_active for c in counts),
    }


def cat_indices_rows(node: IndicesOwner, expr: str | None, options: IndicesOptions) -> list[dict[str, Any]]:
    """One row per index with the raw values `_cat/indices` formats (sizes in bytes)."""
    rows = []
    for index in indices_of(node, options, expr):
        row: dict[str, Any] = {
            "health": index_health(index),
            "status": "close" if index.closed else "open",
            "index": index.name,
            "uuid": index.uuid,
            "pri": index.num_shards,
            "rep": _replicas(index),
            "creation.date": index.creation_date,
        }
        # Elasticsearch leaves a closed index's figures empty; those of an index with a shard
        # actor down too, rather than failing the listing of every index.
        with contextlib.suppress(ShardUnavailable):
            if not index.closed:
                size = index.store_size_bytes()
                row |= {
                    "docs.count": index.lucene_doc_count(),  # nested objects too, as Lucene counts
                    "docs.deleted": index.deleted_count(),
                    "store.size": size,
                    "pri.store.size": size,
                    "dataset.size": size,
                }
        rows.append(row)
    return rows
