"""Index aliases: the table of every alias, its changes (all or nothing), and what a name means.

An alias is a second name for one or more indices, with an optional filter (ANDed into every
search through it), search and index routing, and a write index. As in Elasticsearch, alias
metadata belongs to each index (`AliasMetadata` per index and alias), but the whole table is
one value: a change builds a new table, writes it to `<data>/aliases.json` (fsynced, renamed
into place) and only then replaces the node's reference. A search reads the reference once, so
it sees the table before or after a `POST /_aliases`, never half of one: an alias swapped from
one index to another answers from exactly one of them. One file rather than each index's
`meta.json` because an action list touching several indices must survive a crash whole.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import fsync_dir, private
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    IndexNotFound,
    ResourceNotFound,
)
from leafsearch.indices.admin import (
    IndicesOptions,
    concrete_only,
    resolve_index_expression,
    validate_index_name,
)
from leafsearch.request.date_math_names import resolve_name
from leafsearch.request.query_dsl import Bool, Query, parse_query
from leafsearch.search.targets import IndexScope

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.indices.owner import IndicesOwner


class InvalidAliasName(ElasticError):
    error_type = "invalid_alias_name_exception"
    status = 400

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"Invalid alias name [{name}]: {why}")


class AliasesNotFound(ElasticError):
    error_type = "aliases_not_found_exception"
    status = 404

    def __init__(self, names: Iterable[str]) -> None:
        names = list(names)
        super().__init__(
            f"aliases [{','.join(names)}] missing",
            extra={"resource.type": "aliases", "resource.id": names},
        )


@dataclass(frozen=True, slots=True)
class AliasMetadata:
    """One alias of one index. `filter` is the JSON the client sent; `query` its parsed form."""

    filter: dict[str, Any] | None = None
    index_routing: str | None = None
    search_routing: str | None = None
    is_write_index: bool | None = None
    is_hidden: bool | None = None
    query: Query | None = None

    def to_body(self) -> dict[str, Any]:
        """As `GET /_alias` shows it: only what is set."""
        body: dict[str, Any] = {}
        for key in ("filter", "index_routing", "search_routing", "is_write_index", "is_hidden"):
            value = getattr(self, key)
            if value is not None:
                body[key] = value
        return body

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> AliasMetadata:
        flt = body.get("filter")
        return cls(
            flt,
            body.get("index_routing"),
            body.get("search_routing"),
            body.get("is_write_index"),
            body.get("is_hidden"),
            parse_query(flt) if flt else None,
        )


#: alias name -> {index name -> its metadata}. Never mutated once published.
Table = Mapping[str, Mapping[str, AliasMetadata]]


class AliasTable:
    """The node's aliases: `current` is replaced whole, under `Node.lock`, on every change.

    `resolving` is what names resolve through: the aliases and the data streams, each stream as
    an alias of its backing indices whose write index is the newest (`data_streams.py` sets
    `streams`). Listings of aliases read `current` only."""

    def __init__(self, path: Path, indices: Mapping[str, Index]) -> None:
        self.path = path
        self.current: Table = {}
        self.streams: Table = {}
        #: Backing index -> its data stream.
        self.backing: dict[str, str] = {}
        self.resolving: Table = {}
        #: Called with the table's bytes before a change is written, when coordinators share
        #: aliases (node/cluster_sync.py publishes them to the cluster's metadata); returns the
        #: table as published (merged with another coordinator's change made meanwhile).
        self.shared: Callable[[bytes], bytes] | None = None
        if path.exists():
            self.adopt(path.read_bytes(), indices)

    def adopt(self, data: bytes, indices: Mapping[str, Index]) -> None:
        """Take the table written as `data` (this node's file, or another coordinator's change)."""
        by_uuid = {index.uuid: name for name, index in indices.items()}
        table: dict[str, dict[str, AliasMetadata]] = {}
        for uuid, aliases in orjson.loads(data).items():
            name = by_uuid.get(uuid)
            if name is None:  # an index deleted before its aliases were rewritten
                continue
            for alias, body in aliases.items():
                table.setdefault(alias, {})[name] = AliasMetadata.from_body(body)
        self.set_current(table)

    def of_index(self, index: str) -> dict[str, AliasMetadata]:
        """The aliases of one index, by alias name in name order."""
        table = self.current
        return {alias: table[alias][index] for alias in sorted(table) if index in table[alias]}

    def publish(self, table: Table, indices: Mapping[str, Index]) -> None:
        """Write `table` durably, then make it current. The caller holds `Node.lock`."""
        by_uuid: dict[str, dict[str, Any]] = {}
        for alias, members in table.items():
            for name, meta in members.items():
                by_uuid.setdefault(indices[name].uuid, {})[alias] = meta.to_body()
        data = orjson.dumps(by_uuid)
        if self.shared is not None:
            published = self.shared(data)
            if published != data:  # another coordinator's change merged in
                self.write(published)
                self.adopt(published, indices)
                return
        self.write(data)
        self.set_current(table)

    def set_current(self, table: Table) -> None:
        """Make `table` current (written already, or another coordinator's)."""
        self.current = {alias: dict(members) for alias, members in table.items() if members}
        self.resolving = {**self.current, **self.streams}

    def write(self, data: bytes) -> None:
        """Replace the file with `data`, durably."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "wb", opener=private) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.path.parent)

    def set_streams(self, streams: Table) -> None:
        """The data streams as aliases (`resolving`); the caller holds `Node.lock`."""
        self.streams = streams
        self.backing = {index: stream for stream, members in streams.items() for index in members}
        self.resolving = {**self.current, **streams}

    def without_index(self, name: str) -> dict[str, dict[str, AliasMetadata]]:
        return {
            alias: {i: m for i, m in members.items() if i != name} for alias, members in self.current.items()
        }


def is_hidden(members: Mapping[str, AliasMetadata]) -> bool:
    return any(meta.is_hidden for meta in members.values())


# ---------------------------------------------------------------------------------------------
# changes


@dataclass(frozen=True, slots=True)
class AliasAction:
    """One entry of `POST /_aliases`, as sent (names not yet resolved)."""

    kind: str  # add, remove, remove_index
    indices: tuple[str, ...]
    aliases: tuple[str, ...]
    meta: AliasMetadata
    must_exist: bool | None = None


_ACTION_KINDS = ("add", "remove", "remove_index")
_TARGET_KEYS = frozenset({"index", "indices"})
_ADD_KEYS = frozenset({"filter", "routing", "index_routing", "search_routing", "is_write_index", "is_hidden"})
#: The keys each action takes; any other known key is "unsupported" for it, as Elasticsearch says.
_ACTION_KEYS = {
    "add": _TARGET_KEYS | {"alias", "aliases"} | _ADD_KEYS,
    "remove": _TARGET_KEYS | {"alias", "aliases", "must_exist"},
    "remove_index": _TARGET_KEYS,
}
_KNOWN_KEYS = _ACTION_KEYS["add"] | _ACTION_KEYS["remove"]


def _names(body: Mapping[str, Any], one: str, many: str) -> tuple[str, ...] | None:
    if one in body and many in body:
        raise IllegalArgument(f"Only one of [{one}] and [{many}] is supported")
    if one in body:
        value = body[one]
        if not isinstance(value, str) or not value:
            raise IllegalArgument(f"[{one}] can't be empty string")
        return (value,)
    if many in body:
        values = body[many]
        values = [values] if isinstance(values, str) else values
        if not isinstance(values, list) or not values:
            raise IllegalArgument(f"[{many}] can't be empty")
        if any(not isinstance(v, str) or not v for v in values):
            raise IllegalArgument(f"[{many}] can't contain empty string")
        return tuple(values)
    return None


def _routing(value: Any, key: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise IllegalArgument(f"[{key}] must be a string or a number")
    return str(value)


def _flag(value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def alias_metadata(alias: str, body: Mapping[str, Any]) -> AliasMetadata:
    """The metadata of an `add` (or of `PUT <index>/_alias/<name>`, or `aliases` at creation)."""
    routing = _routing(body.get("routing"), "routing")
    index_routing = _routing(body.get("index_routing"), "index_routing") or routing
    search_routing = _routing(body.get("search_routing"), "search_routing") or routing
    if index_routing is not None and "," in index_routing:
        raise IllegalArgument(f"alias [{alias}] has several index routing values associated with it")
    flt = body.get("filter")
    query = None
    if flt is not None:
        if not isinstance(flt, dict):
            raise IllegalArgument(f"failed to parse filter for alias [{alias}]")
        if flt:
            try:
                query = parse_query(flt)
            except ElasticError as exc:
                raise IllegalArgument(f"failed to parse filter for alias [{alias}]", caused_by=exc) from None
    return AliasMetadata(
        flt or None,
        index_routing,
        search_routing,
        _flag(body.get("is_write_index")),
        _flag(body.get("is_hidden")),
        query,
    )


def parse_actions(body: Any) -> list[AliasAction]:
    """The `actions` of `POST /_aliases`; a bad entry fails the request before anything changes."""
    if not isinstance(body, Mapping) or "actions" not in body:
        raise ActionRequestValidation("Must specify at least one alias action")
    unknown = [k for k in body if k != "actions"]
    if unknown:
        raise IllegalArgument(f"[aliases] unknown field [{unknown[0]}]")
    entries = body["actions"]
    entries = [entries] if isinstance(entries, Mapping) else entries
    if not isinstance(entries, list) or not entries:
        raise ActionRequestValidation("Must specify at least one alias action")
    actions = []
    for entry in entries:
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise IllegalArgument("Too many operations declared on operation entry")
        ((kind, spec),) = entry.items()
        if kind not in _ACTION_KINDS:
            raise IllegalArgument(f"[alias_action] unknown field [{kind}]")
        if not isinstance(spec, Mapping):
            raise IllegalArgument(f"[{kind}] expected an object")
        for key in spec:
            if key not in _ACTION_KEYS[kind]:
                if key in _KNOWN_KEYS:
                    raise IllegalArgument(f"[{key}] is unsupported for [{kind.upper()}]")
                raise IllegalArgument(f"[{kind}] unknown field [{key}]")
        indices = _names(spec, "index", "indices")
        aliases = _names(spec, "alias", "aliases")
        if indices is None:
            raise IllegalArgument("One of [index] or [indices] is required")
        if kind != "remove_index" and aliases is None:
            raise IllegalArgument("One of [alias] or [aliases] is required")
        meta = alias_metadata(aliases[0], spec) if kind == "add" else AliasMetadata()  # type: ignore[index]
        actions.append(AliasAction(kind, indices, aliases or (), meta, _flag(spec.get("must_exist"))))
    return actions


def validate_alias_name(alias: str) -> None:
    """The rules of index names, reported as an alias name's."""
    try:
        validate_index_name(alias)
    except ElasticError as exc:
        why = exc.reason.split("], ", 1)[1] if "], " in exc.reason else exc.reason
        raise InvalidAliasName(alias, why) from None


def _concrete(node: IndicesOwner, expressions: Iterable[str]) -> list[str]:
    """The indices an action names: wildcards expand to open indices, never to aliases."""
    names: dict[str, None] = {}
    for expr in expressions:
        names.update(dict.fromkeys(resolve_index_expression(node.indices, expr, allow_no_indices=False)))
    return list(names)


def update_aliases(node: IndicesOwner, actions: list[AliasAction]) -> dict[str, Any]:
    """Apply every action or none: the new table is built, checked and written before it is
    published. `remove_index` deletes the index with the rest."""
    now = int(time.time() * 1000)  # the `now` of every alias name written as date math
    with node.lock:
        table = {alias: dict(members) for alias, members in node.aliases.current.items()}
        doomed: list[str] = []
        results: list[dict[str, Any]] = []
        errors = False
        changed = False
        for action in actions:
            if action.kind == "remove_index":
                indices = concrete_only(
                    node, ",".join(action.indices), IndicesOptions(allow_no_indices=False)
                )
            else:
                indices = _concrete(node, action.indices)
            removed = 0
            if action.kind == "remove_index":
                for name in indices:
                    for members in table.values():
                        members.pop(name, None)
                doomed.extend(indices)
                changed = True
            elif action.kind == "add":
                for alias in (resolve_name(a, now) for a in action.aliases):
                    validate_alias_name(alias)
                    if alias in node.indices:
                        raise InvalidAliasName(
                            alias, "an index or data stream exists with the same name as the alias"
                        )
                    for name in indices:
                        table.setdefault(alias, {})[name] = action.meta
                changed = True
            else:
                for name in indices:
                    for alias in action.aliases:
                        matching = [a for a in table if name in table[a] and fnmatch.fnmatchcase(a, alias)]
                        if not matching and action.must_exist:
                            raise ResourceNotFound(f"required alias [{alias}] does not exist")
                        for a in matching:
                            del table[a][name]
                            removed += 1
                changed = changed or removed > 0
            result = {
                "action": {"type": action.kind, "indices": sorted(indices), "aliases": list(action.aliases)},
                "status": 200,
            }
            if action.kind == "remove" and removed == 0:
                errors = True
                missing = AliasesNotFound(action.aliases)
                result["status"] = missing.status
                result["error"] = missing._cause_body()
            results.append(result)
        if not changed:
            raise AliasesNotFound(dict.fromkeys(a for action in actions for a in action.aliases))
        for alias in {a for action in actions if action.kind == "add" for a in action.aliases}:
            _check_alias(alias, table.get(alias, {}))
        for name in doomed:
            if name in node.indices:
                node.drop_index(name, keep_aliases=True)
        node.aliases.publish(table, node.indices)
    body: dict[str, Any] = {"acknowledged": True, "errors": errors}
    if errors:
        body["action_results"] = results
    return body


def _check_alias(alias: str, members: Mapping[str, AliasMetadata]) -> None:
    """What Elasticsearch's metadata refuses once the actions are applied (500, illegal state)."""
    writers = sorted(name for name, meta in members.items() if meta.is_write_index)
    if len(writers) > 1:
        raise ElasticError(
            f"alias [{alias}] has more than one write index [{','.join(writers)}]",
            error_type="illegal_state_exception",
        )
    hidden = sorted(name for name, meta in members.items() if meta.is_hidden)
    if hidden and len(hidden) != len(members):
        visible = sorted(name for name in members if name not in hidden)
        raise ElasticError(
            f"alias [{alias}] has is_hidden set to true on indices [{','.join(hidden)}] but does not have "
            f"is_hidden set to true on indices [{','.join(visible)}]; alias must have the same is_hidden "
            "setting on all indices",
            error_type="illegal_state_exception",
        )


def put_alias(
    node: IndicesOwner, index_expr: str, alias: str, body: Mapping[str, Any] | None
) -> dict[str, Any]:
    """`PUT <index>/_alias/<name>`: one `add` action."""
    body = body or {}
    unknown = [k for k in body if k not in _ADD_KEYS]
    if unknown:
        raise IllegalArgument(f"[alias] unknown field [{unknown[0]}]")
    meta = alias_metadata(alias, body)
    indices = tuple(p for p in index_expr.split(",") if p)
    return update_aliases(node, [AliasAction("add", indices, (alias,), meta)])


def delete_alias(node: IndicesOwner, index_expr: str, names: str) -> dict[str, Any]:
    """`DELETE <index>/_alias/<name>`: every matching alias of every named index, or a 404."""
    with node.lock:
        indices = _concrete(node, [p for p in index_expr.split(",") if p])
        patterns = [p for p in names.split(",") if p]
        table = {alias: dict(members) for alias, members in node.aliases.current.items()}
        removed = False
        for alias, members in table.items():
            if any(p == "_all" or fnmatch.fnmatchcase(alias, p) for p in patterns):
                for name in indices:
                    removed = members.pop(name, None) is not None or removed
        if not removed:
            raise AliasesNotFound(patterns)
        node.aliases.publish(table, node.indices)
    return {"acknowledged": True, "errors": False}


def creation_aliases(body: Any) -> dict[str, AliasMetadata]:
    """The `aliases` object of a create-index body, checked before the index is created."""
    if not isinstance(body, Mapping):
        raise IllegalArgument("[aliases] must be an object")
    out = {}
    now = int(time.time() * 1000)
    for written, spec in body.items():
        alias = resolve_name(written, now)  # `<logs-{now/M}>` names this month's alias
        validate_alias_name(alias)
        if not isinstance(spec, Mapping):
            raise IllegalArgument(f"[{alias}] must be an object")
        unknown = [k for k in spec if k not in _ADD_KEYS]
        if unknown:
            raise IllegalArgument(f"Unknown field [{unknown[0]}] in alias [{alias}]")
        out[alias] = alias_metadata(alias, spec)
    return out


def with_index(table: Table, index: str, aliases: Mapping[str, AliasMetadata]) -> dict:
    """The table with a new index's aliases added and checked (before the index is created)."""
    new = {alias: dict(members) for alias, members in table.items()}
    for alias, meta in aliases.items():
        new.setdefault(alias, {})[index] = meta
    for alias in aliases:
        _check_alias(alias, new[alias])
    return new


# ---------------------------------------------------------------------------------------------
# reads


def get_aliases(
    node: IndicesOwner,
    index_expr: str | None,
    names: str | None,
    *,
    expand_wildcards: str = "all",
    shown: Callable[[str], bool],
) -> tuple[int, dict[str, Any]]:
    """`GET /_alias[/<name>]`, `GET <index>/_alias[/<name>]`: (status, body). Without names every
    index is listed (with its aliases, maybe none); with names, the indices holding one, and a
    404 naming those that match nothing. Only the aliases `shown` names are listed (the caller's)."""
    table = node.aliases.current
    with node.lock:
        indices = resolve_index_expression(
            node.indices,
            index_expr,
            ignore_unavailable=False,
            expand_wildcards=expand_wildcards,
            aliases=table,
        )
    patterns = [p for p in (names or "").split(",") if p]
    wanted = [p for p in patterns if not p.startswith("-")]
    excluded = [p[1:] for p in patterns if p.startswith("-")]

    def selected(alias: str) -> bool:
        if not wanted or "_all" in wanted:
            return not any(fnmatch.fnmatchcase(alias, p) for p in excluded)
        return any(fnmatch.fnmatchcase(alias, p) for p in wanted) and not any(
            fnmatch.fnmatchcase(alias, p) for p in excluded
        )

    body: dict[str, Any] = {}
    found: set[str] = set()
    for name in sorted(indices):
        aliases = {a: m.to_body() for a, m in node.aliases.of_index(name).items() if selected(a) and shown(a)}
        found.update(aliases)
        if aliases or not wanted:
            body[name] = {"aliases": aliases}
    missing = [p for p in wanted if p != "_all" and "*" not in p and p not in found]
    if missing:
        error = (
            f"alias [{missing[0]}] missing" if len(missing) == 1 else f"aliases [{','.join(missing)}] missing"
        )
        return 404, {"error": error, "status": 404, **body}
    return 200, body


def cat_rows(node: IndicesOwner, names: str | None, *, shown: Callable[[str], bool]) -> list[dict[str, Any]]:
    """One row per (alias, index) for `_cat/aliases`, of the aliases `shown` names (the caller's)."""
    table = node.aliases.current
    patterns = [p for p in (names or "").split(",") if p and p != "_all"]
    rows = []
    for alias in sorted(table):
        if not shown(alias) or (patterns and not any(fnmatch.fnmatchcase(alias, p) for p in patterns)):
            continue
        for index in sorted(table[alias]):
            meta = table[alias][index]
            rows.append(
                {
                    "alias": alias,
                    "index": index,
                    "filter": "*" if meta.filter else "-",
                    "routing.index": meta.index_routing or "-",
                    "routing.search": meta.search_routing or "-",
                    "is_write_index": "-"
                    if meta.is_write_index is None
                    else str(meta.is_write_index).lower(),
                }
            )
    return rows


# ---------------------------------------------------------------------------------------------
# what a name means to a search and to a write


def search_scopes(
    table: Mapping[str, Mapping[str, AliasMetadata]], names: list[str], routing: str | None
) -> dict[str, IndexScope]:
    """Per concrete index of a resolved expression (index and alias names): its filter and routing.

    As Elasticsearch: an index named directly, or through an alias without a filter, is read
    whole; through filtered aliases only, the filters are ORed. Alias search routing is
    intersected with the request's `routing`; an index reached without alias routing keeps the
    request's. `table`: the alias table's current version (`AliasTable.current`)."""
    requested = frozenset(v for v in routing.split(",") if v) if routing else None
    filters: dict[str, list[Query] | None] = {}
    routings: dict[str, set[str] | None] = {}

    def reach(index: str, query: Query | None, values: frozenset[str] | None) -> None:
        if query is None:
            filters[index] = None
        elif filters.get(index, []) is not None:
            filters.setdefault(index, []).append(query)  # type: ignore[union-attr]
        if values is None:
            routings[index] = None
        elif routings.get(index, set()) is not None:
            routings.setdefault(index, set()).update(values)  # type: ignore[union-attr]

    for name in names:
        members = table.get(name)
        if members is None:
            reach(name, None, requested)
            continue
        for index, meta in members.items():
            values = requested
            if meta.search_routing is not None:
                own = frozenset(v for v in meta.search_routing.split(",") if v)
                values = own & requested if requested is not None else own
            reach(index, meta.query, values)
    scopes = {}
    for index in filters:
        queries = filters[index]
        query = None
        if queries:
            query = queries[0] if len(queries) == 1 else Bool(should=tuple(queries), minimum_should_match="1")
        values = routings.get(index)
        scopes[index] = IndexScope(query, frozenset(values) if values is not None else None)
    return scopes


def write_target(
    table: Mapping[str, Mapping[str, AliasMetadata]], name: str, routing: str | None, *, require_alias: bool
) -> tuple[str, str | None]:
    """(index name, routing) of a write to `name`: an alias's write index and its index routing.
    `table`: the alias table's current version (`AliasTable.current`).

    `require_alias`: a name that is not an alias is refused, as Elasticsearch refuses it."""
    members = table.get(name)
    if members is None:
        if require_alias:
            raise IndexNotFound(
                name, suffix=f" and [require_alias] request flag is [true] and [{name}] is not an alias"
            )
        return name, routing
    index = write_index(name, members)
    meta = members[index]
    if meta.index_routing is not None:
        if routing is not None and routing != meta.index_routing:
            raise IllegalArgument(
                f"Alias [{name}] has index routing associated with it [{meta.index_routing}], and was "
                f"provided with routing value [{routing}], rejecting operation"
            )
        routing = meta.index_routing
    return index, routing


def write_index(alias: str, members: Mapping[str, AliasMetadata]) -> str:
    """The index writes through `alias` go to: the one marked `is_write_index`, else its only
    index unless that one is marked `false`."""
    for index, meta in members.items():
        if meta.is_write_index:
            return index
    if len(members) == 1:
        ((index, meta),) = members.items()
        if meta.is_write_index is None:
            return index
    raise IllegalArgument(
        f"no write index is defined for alias [{alias}]. The write index may be explicitly disabled using "
        "is_write_index=false or the alias points to multiple indices without one being designated as a "
        "write index"
    )


def single_index(table: Mapping[str, Mapping[str, AliasMetadata]], name: str) -> str:
    """The index a single-document read names (`GET <alias>/_doc/<id>`): an alias must have one.
    `table`: the alias table's current version (`AliasTable.current`)."""
    members = table.get(name)
    if members is None:
        return name
    if len(members) > 1:
        raise IllegalArgument(
            f"alias [{name}] has more than one index associated with it [{', '.join(sorted(members))}], "
            "can't execute a single index op"
        )
    return next(iter(members))
