"""The `join` field (parent/child relations between documents of one index), as Elasticsearch's
parent-join module maps and indexes it.

A join field holds each document's relation name as a keyword (`my_join`: `question`), and one
keyword per parent relation, `my_join#<parent>`: the parent's `_id` in a child, the document's
own `_id` in a parent. Children are routed to their parent's shard (routing is required), so a
join runs within a shard (search/query/join_queries.py, search/aggs/join.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leafsearch.errors import DocumentParsing, IllegalArgument
from leafsearch.index.mapping import (
    FieldType,
    _bool_param,
    _DocError,
    _java_text,
    _java_type,
    _known_params,
    _MappingError,
    _meta_param,
    _with_java_cause,
)
from leafsearch.index.parsed import ParsedDoc


@dataclass(frozen=True, slots=True)
class Relations:
    """A join field's relations: each parent's children, each child's parent."""

    children_of: dict[str, tuple[str, ...]]
    parent_of: dict[str, str]

    def known(self, name: str) -> bool:
        return name in self.children_of or name in self.parent_of


def parse_relations(value: Any, name: str) -> tuple[dict[str, Any], Relations]:
    """`relations` as given (a child or a list of children per parent), checked as Elasticsearch
    checks them; (what `GET _mapping` shows, the relations)."""
    if type(value) is not dict:
        raise _MappingError(f"relations should be a hash but was of type: class {_java_type(value)}")
    shown: dict[str, Any] = {}
    children_of: dict[str, tuple[str, ...]] = {}
    parent_of: dict[str, str] = {}
    for parent, children in value.items():
        names = children if type(children) is list else [children]
        if any(type(c) is dict or type(c) is list or c is None for c in names):
            raise _MappingError(f"[relations] on mapper [{name}] must hold relation names", True)
        names = list(dict.fromkeys(_java_text(c) for c in names))
        shown[parent] = names[0] if len(names) == 1 else names
        children_of[parent] = tuple(names)
        for child in names:
            if child in parent_of:
                raise _MappingError(f"[{child}] cannot have multiple parents", True)
            parent_of[child] = parent
    return shown, Relations(children_of, parent_of)


def relations_conflicts(before: Relations, after: Relations) -> list[str]:
    """Why a mapping update may not turn relations `before` into `after` (Elasticsearch's rules:
    parents and children are only added, never removed or moved)."""
    out = [f"Cannot remove parent [{p}]" for p in before.children_of if p not in after.children_of]
    out += [f"Cannot remove child [{c}]" for c in before.parent_of if c not in after.parent_of]
    for parent in after.children_of:
        if parent in before.parent_of and parent not in before.children_of:
            out.append(f"Cannot create parent [{parent}] from an existing child")
    for child, parent in after.parent_of.items():
        if child in before.parent_of and before.parent_of[child] != parent:
            out.append(f"Cannot change parent of [{child}]")
        if child in before.children_of and before.parent_of.get(child) != parent:
            out.append(f"Cannot create child [{child}] from an existing root")
    return out


class JoinField(FieldType):
    """A `join` field: its relation name a keyword at its path, and one `parent` keyword per
    parent relation (`subfields`, at `<path>#<parent>`), filled in by `finish` once the
    document's id and routing are known."""

    __slots__ = ("relations",)

    def __init__(
        self,
        path: str,
        name: str,
        type_: str,
        params: dict[str, Any],
        fields: dict[str, FieldType],
        source_key: str | None = None,
    ) -> None:
        super().__init__(path, name, type_, params, {}, source_key)
        self.relations = parse_relations(params.get("relations", {}), name)[1]
        self.subfields = tuple(
            FieldType(self.id_field(parent), self.id_field(parent), "parent", {}, {})
            for parent in self.relations.children_of
        )
        self.parse = self._parse_join

    def id_field(self, parent: str) -> str:
        """The keyword holding the ids that link `parent` documents and their children."""
        return f"{self.path}#{parent}"

    def _parse_join(self, value: Any, doc: ParsedDoc) -> None:
        if value is None:
            return
        for item in value if type(value) is list else (value,):
            relation, parent = self._read(item)
            doc.keyword.setdefault(self.path, []).append(relation)
            if relation in self.relations.parent_of:
                if parent is None:
                    self._refuse(f"[parent] is missing for join field [{self.path}]")
                linked = self.id_field(self.relations.parent_of[relation])
                doc.keyword.setdefault(linked, []).append(parent)

    def _read(self, item: Any) -> tuple[str, str | None]:
        name = parent = None
        if type(item) is dict:
            for key, v in item.items():
                if type(v) is str and key in ("name", "parent"):
                    name, parent = (v, parent) if key == "name" else (name, v)
                elif type(v) in (int, float) and key == "parent":
                    parent = _java_text(v)
                elif type(v) is str or type(v) in (int, float) and key != "parent":
                    self._refuse(f"unknown field name [{key}] in join field [{self.path}]")
        elif type(item) is str:
            name = item
        else:
            token = "VALUE_NUMBER" if type(item) in (int, float) else "VALUE_BOOLEAN"
            token = "START_ARRAY" if type(item) is list else token
            self._refuse(
                f"[{self.path}] expected START_OBJECT or VALUE_STRING but was: {token}",
                "illegal_state_exception",
            )
        if name is None:
            self._refuse(f"null join name in field [{self.path}]")
        if not self.relations.known(name):
            self._refuse(f"unknown join name [{name}] for field [{self.path}]")
        return name, parent

    def _refuse(self, message: str, cause: str = "illegal_argument_exception") -> None:
        def build(location: str, _id: str | None) -> DocumentParsing:
            error = DocumentParsing(f"{location}failed to parse: {message}")
            return _with_java_cause(error, cause, message)  # type: ignore[return-value]

        raise _DocError(self.source_key, build)

    def finish(self, doc: ParsedDoc, doc_id: str | None, routed: bool) -> None:
        """After the document's walk: a parent's own id into its `#` keyword; a child without a
        routing refused (`routed` is False only on a write that gave none)."""
        relations = doc.keyword.get(self.path)
        if not relations:
            return
        for relation in relations:
            if relation in self.relations.parent_of and not routed:
                self._refuse(f"[routing] is missing for join field [{self.path}]")
            if relation in self.relations.children_of and doc_id is not None:
                doc.keyword.setdefault(self.id_field(relation), []).append(doc_id)


def build_join(
    path: str, name: str, node: dict, allowed: frozenset[str], source_key: str | None
) -> JoinField:
    """A `join` mapping, checked as Elasticsearch's ParentJoinFieldMapper checks it; the shown
    parameters are Elasticsearch's (`eager_global_ordinals` always, `relations` normalised)."""
    if path != name or source_key is not None:
        raise _MappingError(f"join field [{path}] cannot be added inside an object or in a multi-field", True)
    params: dict[str, Any] = {"eager_global_ordinals": True, "relations": {}}
    for key, value in _known_params(node, allowed, f"mapper [{name}] of type [join]"):
        if key == "relations":
            params[key] = parse_relations(value, name)[0]
        elif key == "meta":
            params[key] = _meta_param(value, name, key)
        else:
            params[key] = _bool_param(value, name, key)
    return JoinField(path, name, "join", params, {}, source_key)


def check_merge(old: JoinField, new: JoinField) -> list[str]:
    """The conflicts of a mapping update of a join field (its relations may grow)."""
    return relations_conflicts(old.relations, new.relations)


def only_one(fields: list[JoinField]) -> JoinField | None:
    """The index's join field; Elasticsearch allows one."""
    if len(fields) > 1:
        names = ", ".join(f.path for f in fields)
        raise IllegalArgument(f"Only one [parent-join] field can be defined per index, got [{names}]")
    return fields[0] if fields else None
