"""Index templates: legacy (`_template`), composable (`_index_template`) and component
(`_component_template`), kept in `<data>/templates.json` and applied when an index is created.

The three tables are one file, replaced whole (temporary file, fsync, rename, folder fsync) under
`Node.lock`, so a change is atomic and two clients putting templates at once lose neither. A
template is validated when it is put (settings, mappings and aliases parsed as a create-index
request parses them), and stored in that parsed, canonical form.

Resolution is Elasticsearch's: the composable template of highest `priority` whose
`index_patterns` match the name wins (its component templates in `composed_of` order, then its
own `template`); only when none matches do the matching legacy templates apply, in ascending
`order`. The create request's own settings, mappings and aliases come last and win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.durable import write_private
from leafsearch.common.settings import nest, parse_index_settings
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    ParseException,
    ResourceNotFound,
    XContentParseError,
)
from leafsearch.index.analyzers import analysis_of
from leafsearch.index.mapping import Mapping as IndexMapping
from leafsearch.index.mapping import _wildcard as simple_match

if TYPE_CHECKING:
    from leafsearch.indices.owner import IndicesOwner

KINDS = ("legacy", "composable", "component")
_LEGACY_KEYS = frozenset({"index_patterns", "order", "version", "settings", "mappings", "aliases"})
_COMPOSABLE_KEYS = frozenset(
    {
        "index_patterns",
        "composed_of",
        "priority",
        "version",
        "_meta",
        "template",
        "data_stream",
        "allow_auto_create",
        "ignore_missing_component_templates",
        "deprecated",
    }
)
_COMPONENT_KEYS = frozenset({"template", "version", "_meta", "deprecated"})
_TEMPLATE_KEYS = frozenset({"settings", "mappings", "aliases", "lifecycle"})


class IndexTemplateMissing(ElasticError):
    error_type = "index_template_missing_exception"
    status = 404

    def __init__(self, name: str) -> None:
        super().__init__(f"index_template [{name}] missing")


class InvalidIndexTemplate(ElasticError):
    error_type = "invalid_index_template_exception"
    status = 400

    def __init__(self, name: str, cause: str) -> None:
        super().__init__(f"index_template [{name}] invalid, cause [{cause}]", extra={"name": name})


@dataclass
class Resolved:
    """What templates give an index of one name: flat settings, mappings to merge in order,
    aliases, and the composable template that won (its `data_stream`, `allow_auto_create`)."""

    settings: dict[str, Any] = field(default_factory=dict)
    mappings: list[dict[str, Any]] = field(default_factory=list)
    aliases: dict[str, dict[str, Any]] = field(default_factory=dict)
    template: str | None = None
    data_stream: dict[str, Any] | None = None
    allow_auto_create: bool | None = None
    #: Other templates matching the name (composable: of lower priority), as `_simulate` lists them.
    overlapping: list[dict[str, Any]] = field(default_factory=list)

    def mapping_body(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for body in self.mappings:
            merged = merge_mappings(merged, body)
        return merged


class TemplateStore:
    """The node's templates. `tables[kind][name]` is a canonical body; tables are replaced whole,
    never mutated, so readers need no lock; writers hold `Node.lock` (`publish`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tables: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in KINDS}
        #: Changes published since start (the cluster state's version counts them).
        self.version = 0
        #: Called with the tables' bytes before a change is written, when coordinators share them
        #: (node/cluster_sync.py); returns the tables as published (merged with another's change).
        self.shared: Callable[[bytes], bytes] | None = None
        if path.exists():
            self._take(orjson.loads(path.read_bytes()))

    def publish(self, kind: str, table: dict[str, dict[str, Any]]) -> None:
        data = orjson.dumps({**self.tables, kind: table})
        self.adopt(data if self.shared is None else self.shared(data))

    def adopt(self, data: bytes) -> None:
        """Write the tables `data` (a change made here, or another coordinator's) and take them."""
        write_private(self.path, data)
        self._take(orjson.loads(data))
        self.version += 1

    def _take(self, stored: Mapping[str, Any]) -> None:
        self.tables = {kind: dict(stored.get(kind, {})) for kind in KINDS}

    # ---- resolution --------------------------------------------------------------------

    def resolve(self, name: str, *, hidden: bool = False) -> Resolved:
        """The templates' contribution to a new index `name`. A hidden index (`index.hidden` in
        its request) takes no template whose only pattern is a global `*`, as in Elasticsearch."""
        composable = self.tables["composable"]
        matching = [
            (t.get("priority") or 0, n)
            for n, t in composable.items()
            if _matches(t["index_patterns"], name, hidden)
        ]
        if matching:
            matching.sort(key=lambda pair: (-pair[0], pair[1]))
            winner = matching[0][1]
            resolved = self.compose(composable[winner], winner)
            resolved.overlapping = [
                {"name": n, "index_patterns": composable[n]["index_patterns"]} for _, n in matching[1:]
            ]
            return resolved
        resolved = Resolved()
        legacy = self.tables["legacy"]
        for _, n in sorted(
            (t.get("order", 0), n) for n, t in legacy.items() if _matches(t["index_patterns"], name, hidden)
        ):
            template = legacy[n]
            resolved.settings.update(template.get("settings", {}))
            if template.get("mappings"):
                resolved.mappings.append(template["mappings"])
            resolved.aliases.update(template.get("aliases", {}))
        return resolved

    def compose(self, template: Mapping[str, Any], name: str) -> Resolved:
        return compose(template, name, self.tables["component"])

    def state_sections(self) -> dict[str, Any]:
        """The templates as `GET /_cluster/state` shows them under `metadata`."""
        return {
            "templates": {n: render_legacy(t, flat=False) for n, t in sorted(self.tables["legacy"].items())},
            "index_template": {
                n: render_composable(t, flat=False) for n, t in sorted(self.tables["composable"].items())
            },
            "component_template": {
                n: render_component(t, flat=False) for n, t in sorted(self.tables["component"].items())
            },
        }


def compose(template: Mapping[str, Any], name: str, components: Mapping[str, Any]) -> Resolved:
    """A composable template's settings, mappings and aliases: its components in order, then its
    own `template`."""
    resolved = Resolved(
        template=name,
        data_stream=template.get("data_stream"),
        allow_auto_create=template.get("allow_auto_create"),
    )
    parts = [components[c]["template"] for c in template.get("composed_of", []) if c in components]
    for part in [*parts, template.get("template", {})]:
        resolved.settings.update(part.get("settings", {}))
        if part.get("mappings"):
            resolved.mappings.append(part["mappings"])
        resolved.aliases.update(part.get("aliases", {}))
    return resolved


def _matches(patterns: Iterable[str], name: str, hidden: bool) -> bool:
    patterns = list(patterns)
    if hidden and patterns == ["*"]:
        return False
    return any(simple_match(p).fullmatch(name) for p in patterns)


def merge_mappings(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """`over` laid on `base` as Elasticsearch merges template mappings: objects' `properties`
    merge field by field, recursively; any other field or parameter is replaced."""
    out = dict(base)
    for key, value in over.items():
        if key == "properties" and isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            props = dict(out[key])
            for fname, fbody in value.items():
                old = props.get(fname)
                if _is_object(old) and _is_object(fbody):
                    props[fname] = merge_mappings(old, fbody)
                else:
                    props[fname] = fbody
            out[key] = props
        else:
            out[key] = value
    return out


def _is_object(body: Any) -> bool:
    return (
        isinstance(body, Mapping)
        and body.get("type", "object") in ("object", "nested")
        and ("properties" in body or "type" not in body)
    )


# ---------------------------------------------------------------------------------------------
# parsing and validation


def _template_part(body: Any, where: str) -> dict[str, Any]:
    """A `template` object (or a legacy template's own keys): settings, mappings and aliases
    validated as a create-index request validates them, in their canonical form."""
    from leafsearch.indices.aliases import creation_aliases  # aliases.py imports admin.py

    if not isinstance(body, Mapping):
        raise ParseException(f"[{where}] must be an object")
    out: dict[str, Any] = {}
    settings = parse_index_settings(body.get("settings"))
    if settings:
        out["settings"] = settings
    if body.get("mappings") is not None:
        mappings = body["mappings"]
        if not isinstance(mappings, Mapping):
            raise ParseException(f"[{where}] [mappings] must be an object")
        # refuses what an index would refuse, with the analyzers the part's own settings define
        IndexMapping.from_body(dict(mappings), analysis_of(settings or {}))
        if mappings:
            out["mappings"] = dict(mappings.get("_doc", mappings)) if len(mappings) == 1 else dict(mappings)
    if body.get("aliases") is not None:
        aliases = creation_aliases(body["aliases"])
        if aliases:
            out["aliases"] = {alias: meta.to_body() for alias, meta in aliases.items()}
    return out


def _patterns(body: Mapping[str, Any], name: str) -> list[str]:
    patterns = body.get("index_patterns")
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise ActionRequestValidation("index patterns are missing")
    for pattern in patterns:
        if any(c in pattern for c in ' ,"\\<>|?/') or pattern.startswith(("_", "-", "+")):
            raise InvalidIndexTemplate(
                name,
                f"index_pattern [{pattern}] must not contain a space, a comma, a '#', '\\', '/', '*', '?', "
                f"'\"', '<', '>', '|' other than the wildcard '*', and must not start with '_', '-' or '+'",
            )
    return patterns


def _int(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise IllegalArgument(f"[{key}] must be a number but was [{value}]")
    try:
        return int(value)
    except ValueError:
        raise IllegalArgument(f"[{key}] must be a number but was [{value}]") from None


def _unknown(body: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    for key in body:
        if key not in allowed:
            raise XContentParseError(f"[1:2] [{what}] unknown field [{key}]")


def parse_legacy(name: str, body: Any, order: int | None) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ParseException("request body is required")
    for key in body:
        if key not in _LEGACY_KEYS:
            raise IllegalArgument(f"unknown key [{key}] in the template ")
    out: dict[str, Any] = {
        "order": _int(body.get("order"), "order") or 0,
        "index_patterns": _patterns(body, name),
    }
    if order is not None:
        out["order"] = order
    if body.get("version") is not None:
        out["version"] = _int(body["version"], "version")
    out.update(_template_part(body, name))
    return out


def parse_component(name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ParseException("request body is required")
    _unknown(body, _COMPONENT_KEYS, "component_template")
    if "template" not in body:
        raise XContentParseError("[1:2] Required [template]")
    template = body["template"]
    if isinstance(template, Mapping):
        _unknown(template, _TEMPLATE_KEYS, "template")
    out: dict[str, Any] = {"template": _template_part(template, "template")}
    for key in ("version", "_meta", "deprecated"):
        if body.get(key) is not None:
            out[key] = _int(body[key], key) if key == "version" else body[key]
    return out


def parse_composable(name: str, body: Any) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise ParseException("request body is required")
    _unknown(body, _COMPOSABLE_KEYS, "index_template")
    out: dict[str, Any] = {"index_patterns": _patterns(body, name)}
    composed = body.get("composed_of", [])
    if not isinstance(composed, list) or not all(isinstance(c, str) for c in composed):
        raise IllegalArgument("[composed_of] must be an array of component template names")
    if composed:
        out["composed_of"] = list(composed)
    priority = _int(body.get("priority"), "priority")
    if priority is not None:
        if priority < 0:
            raise ActionRequestValidation("index template priority must be >= 0")
        out["priority"] = priority
    if body.get("version") is not None:
        out["version"] = _int(body["version"], "version")
    if body.get("template") is not None:
        template = body["template"]
        if isinstance(template, Mapping):
            _unknown(template, _TEMPLATE_KEYS, "template")
        out["template"] = _template_part(template, "template")
    if body.get("data_stream") is not None:
        stream = body["data_stream"]
        if not isinstance(stream, Mapping):
            raise ParseException("[data_stream] must be an object")
        for key in stream:
            if key not in ("hidden", "allow_custom_routing"):
                raise XContentParseError(f"[1:2] [data_stream_template] unknown field [{key}]")
        out["data_stream"] = {"hidden": bool(stream.get("hidden", False)), "allow_custom_routing": False}
    for key in ("_meta", "allow_auto_create", "ignore_missing_component_templates", "deprecated"):
        if body.get(key) is not None:
            out[key] = body[key]
    return out


# ---------------------------------------------------------------------------------------------
# rendering


def _render_part(part: Mapping[str, Any], flat: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "settings" in part:
        out["settings"] = dict(sorted(part["settings"].items())) if flat else nest(part["settings"])
    if "mappings" in part:
        out["mappings"] = part["mappings"]
    if "aliases" in part:
        out["aliases"] = part["aliases"]
    return out


def render_legacy(template: Mapping[str, Any], *, flat: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"order": template.get("order", 0)}
    if "version" in template:
        body["version"] = template["version"]
    part = _render_part(template, flat)
    body["index_patterns"] = template["index_patterns"]
    body["settings"] = part.get("settings", {})
    body["mappings"] = part.get("mappings", {})
    body["aliases"] = part.get("aliases", {})
    return body


def render_composable(template: Mapping[str, Any], *, flat: bool) -> dict[str, Any]:
    body = {k: v for k, v in template.items() if k != "template"}
    body.setdefault("composed_of", [])
    if "template" in template:
        body["template"] = _render_part(template["template"], flat)
    return body


def render_component(template: Mapping[str, Any], *, flat: bool) -> dict[str, Any]:
    return {**template, "template": _render_part(template["template"], flat)}


def names_matching(table: Mapping[str, Any], expr: str | None) -> list[str]:
    """Template names of a comma-separated list of names and wildcards (all when absent)."""
    if not expr or expr in ("_all", "*"):
        return sorted(table)
    out: set[str] = set()
    for term in expr.split(","):
        if "*" in term:
            out.update(n for n in table if simple_match(term).fullmatch(n))
        elif term in table:
            out.add(term)
    return sorted(out)


# ---------------------------------------------------------------------------------------------
# operations (the caller is the REST layer or an in-process client)


def put_template(
    node: IndicesOwner, kind: str, name: str, body: Any, *, create: bool = False, order: int | None = None
) -> dict[str, Any]:
    if not name or any(c in name for c in ' ,"*\\<>|?/') or name.startswith("_"):
        raise InvalidIndexTemplate(
            name,
            "name must not contain a space, a comma, '\"', '*', '\\', '<', '>', '|', '?' or '/' and "
            "must not start with '_'",
        )
    if kind == "legacy":
        template = parse_legacy(name, body, order)
    elif kind == "component":
        template = parse_component(name, body)
    else:
        template = parse_composable(name, body)
    store = node.templates
    with node.lock:
        table = dict(store.tables[kind])
        if create and name in table:
            what = {
                "legacy": "index_template",
                "composable": "index template",
                "component": "component template",
            }
            raise IllegalArgument(f"{what[kind]} [{name}] already exists")
        if kind == "composable":
            _check_composable(store, name, template)
        elif kind == "component":
            _check_component_users(node, store, name, template)
        table[name] = template
        store.publish(kind, table)
    return {"acknowledged": True}


def _check_composable(store: TemplateStore, name: str, template: Mapping[str, Any]) -> None:
    """Missing components, overlapping patterns at the same priority, and the mappings a
    composition would give (each must parse), refused as Elasticsearch refuses them."""
    _check_components(store, name, template)
    priority = template.get("priority") or 0
    overlapping = {
        other: body["index_patterns"]
        for other, body in store.tables["composable"].items()
        if other != name
        and (body.get("priority") or 0) == priority
        and _overlap(body["index_patterns"], template["index_patterns"])
    }
    if overlapping:
        described = ", ".join(f"{o} => {_list(p)}" for o, p in sorted(overlapping.items()))
        raise IllegalArgument(
            f"index template [{name}] has index patterns {_list(template['index_patterns'])} matching "
            f"patterns from existing templates [{', '.join(sorted(overlapping))}] with patterns "
            f"({described}) that have the same priority [{priority}], multiple index templates may not "
            "match during index creation, please use a different priority"
        )
    resolved = store.compose(template, name)
    _check_composition(name, resolved)


def _check_composition(name: str, resolved: Resolved) -> None:
    try:
        mapping = IndexMapping.from_body(resolved.mapping_body(), analysis_of(resolved.settings))
    except ElasticError as exc:
        raise InvalidIndexTemplate(
            name, f"composable template [{name}] template after composition is invalid"
        ) from exc
    if resolved.data_stream is not None:
        timestamp = mapping.to_body().get("properties", {}).get("@timestamp")
        if timestamp is not None and timestamp.get("type") not in ("date", "date_nanos"):
            raise IllegalArgument(
                f"data stream timestamp field [@timestamp] is of type [{timestamp.get('type')}], but "
                "[date,date_nanos] is expected"
            )


def _check_component_users(
    node: IndicesOwner, store: TemplateStore, name: str, template: Mapping[str, Any]
) -> None:
    """A changed component must still compose into valid templates where it is used."""
    components = {**store.tables["component"], name: template}
    for user, body in store.tables["composable"].items():
        if name in body.get("composed_of", []):
            _check_composition(user, compose(body, user, components))


def _overlap(a: list[str], b: list[str]) -> bool:
    """Whether some index name could match a pattern of each (Elasticsearch intersects their
    automata): a literal against the other pattern; two wildcard patterns when their texts before
    the first `*` and after the last `*` agree (exact for one `*` each)."""
    for pa in a:
        for pb in b:
            if "*" not in pa or "*" not in pb:
                if simple_match(pa).fullmatch(pb) or simple_match(pb).fullmatch(pa):
                    return True
                continue
            head_a, head_b = pa.split("*")[0], pb.split("*")[0]
            tail_a, tail_b = pa.rsplit("*")[-1], pb.rsplit("*")[-1]
            if (head_a.startswith(head_b) or head_b.startswith(head_a)) and (
                tail_a.endswith(tail_b) or tail_b.endswith(tail_a)
            ):
                return True
    return False


def _list(items: Iterable[str]) -> str:
    return "[" + ", ".join(items) + "]"


def get_templates(node: IndicesOwner, kind: str, expr: str | None, *, flat: bool) -> dict[str, Any]:
    table = node.templates.tables[kind]
    names = names_matching(table, expr)
    if kind == "legacy":
        return {n: render_legacy(table[n], flat=flat) for n in names}
    if not names and expr and expr not in ("_all", "*"):
        what = "index template" if kind == "composable" else "component template"
        raise ResourceNotFound(f"{what} matching [{expr}] not found")
    if kind == "composable":
        return {
            "index_templates": [
                {"name": n, "index_template": render_composable(table[n], flat=flat)} for n in names
            ]
        }
    return {
        "component_templates": [
            {"name": n, "component_template": render_component(table[n], flat=flat)} for n in names
        ]
    }


def cat_rows(node: IndicesOwner, expr: str | None) -> list[dict[str, Any]]:
    """`_cat/templates`: the legacy and composable templates, as Elasticsearch lists them."""
    tables = node.templates.tables
    rows = []
    for kind in ("legacy", "composable"):
        table = tables[kind]
        for name in names_matching(table, expr):
            template = table[name]
            rows.append(
                {
                    "name": name,
                    "index_patterns": _list(template["index_patterns"]),
                    "order": template.get("order", 0) if kind == "legacy" else template.get("priority", 0),
                    "version": template.get("version"),
                    "composed_of": _list(template.get("composed_of", [])) if kind == "composable" else "",
                }
            )
    return sorted(rows, key=lambda row: row["name"])


def template_exists(node: IndicesOwner, kind: str, expr: str) -> bool:
    return bool(names_matching(node.templates.tables[kind], expr))


def delete_templates(node: IndicesOwner, kind: str, expr: str) -> dict[str, Any]:
    store = node.templates
    with node.lock:
        table = dict(store.tables[kind])
        names: list[str] = []
        for term in expr.split(","):
            found = names_matching(table, term)
            if not found and "*" not in term and term != "_all":
                if kind == "component":
                    raise ResourceNotFound(term)
                raise IndexTemplateMissing(term)
            names.extend(found)
        if kind == "component":
            users = {
                user
                for user, body in store.tables["composable"].items()
                if set(body.get("composed_of", [])) & set(names)
            }
            if users:
                raise IllegalArgument(
                    f"component templates {_list(sorted(set(names)))} cannot be removed as they are still in "
                    f"use by index templates {_list(sorted(users))}"
                )
        if kind == "composable":
            _check_not_used_by_streams(node, names)
        for name in names:
            table.pop(name, None)
        if names:
            store.publish(kind, table)
    return {"acknowledged": True}


def _check_not_used_by_streams(node: IndicesOwner, names: list[str]) -> None:
    used = sorted({s.template for s in node.data_streams.current.values() if s.template in names})
    if used:
        streams = sorted(s.name for s in node.data_streams.current.values() if s.template in used)
        raise IllegalArgument(
            f"unable to remove composable templates {_list(used)} as they are in use by a data streams "
            f"{_list(streams)}"
        )


def simulate(resolved: Resolved) -> dict[str, Any]:
    """The body of `_simulate_index` and `_simulate`: the settings, mappings and aliases an
    index would get, and the other templates that match."""
    settings = dict(resolved.settings)
    settings.setdefault("index.number_of_shards", "1")
    settings.setdefault("index.number_of_replicas", "1")
    body: dict[str, Any] = {
        "template": {
            "settings": nest(settings),
            "mappings": resolved.mapping_body(),
            "aliases": resolved.aliases,
        },
        "overlapping": resolved.overlapping,
    }
    return body


def simulate_index(node: IndicesOwner, name: str) -> dict[str, Any]:
    resolved = node.templates.resolve(name)
    if resolved.template is None and not resolved.settings and not resolved.mappings and not resolved.aliases:
        return {}  # no template matches: Elasticsearch answers an empty object
    return simulate(resolved)


def simulate_template(node: IndicesOwner, name: str | None, body: Any) -> dict[str, Any]:
    """`POST /_index_template/_simulate[/<name>]`: a stored template, or the one in the body."""
    store = node.templates
    if body:
        template = parse_composable(name or "simulated", body)
        _check_components(store, name or "simulated", template)
        label = name or "simulated"
    else:
        if name is None:
            raise ActionRequestValidation("[name] or a template body is required")
        template = store.tables["composable"].get(name)
        if template is None:
            raise ResourceNotFound(f"unable to simulate template [{name}] that does not exist")
        label = name
    resolved = store.compose(template, label)
    resolved.overlapping = [
        {"name": other, "index_patterns": t["index_patterns"]}
        for other, t in sorted(store.tables["composable"].items())
        if other != label and _overlap(t["index_patterns"], template["index_patterns"])
    ]
    return simulate(resolved)


def _check_components(store: TemplateStore, name: str, template: Mapping[str, Any]) -> None:
    components = store.tables["component"]
    ignored = set(template.get("ignore_missing_component_templates") or [])
    missing = [c for c in template.get("composed_of", []) if c not in components and c not in ignored]
    if missing:
        raise InvalidIndexTemplate(
            name, f"index template [{name}] specifies component templates {_list(missing)} that do not exist"
        )


# ---------------------------------------------------------------------------------------------
# what an index creation takes from them


def creation_body(resolved: Resolved, body: Mapping[str, Any] | None) -> dict[str, Any]:
    """A create-index body with the templates' settings, mappings and aliases under the request's."""
    body = dict(body or {})
    if not (resolved.settings or resolved.mappings or resolved.aliases):
        return body
    request_settings = parse_index_settings(body.get("settings"))
    out: dict[str, Any] = {"settings": {**resolved.settings, **request_settings}}
    mappings = resolved.mapping_body()
    if body.get("mappings") is not None:
        own = body["mappings"]
        if isinstance(own, Mapping) and len(own) == 1 and isinstance(own.get("_doc"), Mapping):
            own = own["_doc"]
        mappings = merge_mappings(mappings, own) if isinstance(own, Mapping) else own
    out["mappings"] = mappings
    aliases = dict(resolved.aliases)
    if body.get("aliases") is not None:
        if not isinstance(body["aliases"], Mapping):
            raise IllegalArgument("[aliases] must be an object")
        aliases.update(body["aliases"])
    if aliases:
        out["aliases"] = aliases
    for key, value in body.items():
        if key not in out:
            out[key] = value
    return out
