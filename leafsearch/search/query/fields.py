"""Fields of a query as the shard's mapping knows them: their types, whether they can be searched,
and field patterns (`title^2`, `*.name`, `*`) resolved to mapped fields."""

from __future__ import annotations

from typing import Any

from leafsearch.search.query.context import QueryContext, failed


def field_type(ctx: QueryContext, name: str) -> Any:
    return ctx.mapping.field(name) if ctx.mapping is not None else None


def searchable(ctx: QueryContext, ft: Any, name: str, *, needs_index: bool = False) -> None:
    """Elasticsearch searches a field through its index, or through doc values when it has them;
    text fields have no doc values."""
    indexed = getattr(ft, "index", True)
    doc_values = getattr(ft, "doc_values", True) and ft.kind != "text"
    if not indexed and (needs_index or not doc_values):
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"Cannot search on field [{name}] since it is not indexed nor has doc values.",
        )


#: Field types Elasticsearch never searches by value, with its refusal.
_UNSEARCHABLE = {
    "binary": "Binary fields do not support searching",
    "rank_feature": "Queries on [rank_feature] fields are not supported",
    "percolator": "Percolator fields are not searchable directly, use a percolate query instead",
}


def refuse_vector(ctx: QueryContext, ft: Any, name: str, queries: str) -> None:
    """Vectors are searched by kNN only, points by the geo queries: Elasticsearch refuses
    term-level queries on them (and on the types of `_UNSEARCHABLE`)."""
    if type_of(ft) in _UNSEARCHABLE:
        raise failed(ctx, "illegal_argument_exception", _UNSEARCHABLE[type_of(ft)])
    if ft.type == "geo_point" and queries != "range":
        raise failed(
            ctx,
            "illegal_argument_exception",
            "Geometry fields do not support exact searching, use dedicated geometry queries instead: "
            f"[{name}]",
        )
    if ft.kind == "vector" or ft.type == "geo_point":
        raise failed(
            ctx,
            "illegal_argument_exception",
            f"Field [{name}] of type [{ft.type}] doesn't support {queries} queries",
        )


def type_of(ft: Any) -> str:
    return getattr(ft, "type", ft.kind)


def expand_fields(ctx: QueryContext, specs: tuple[str, ...] | list[str]) -> list[tuple[str, float]]:
    """`title^2`, `*.name` and `*` resolved to mapped fields with their boosts (boosts of a field
    named twice multiply, as Elasticsearch merges them)."""
    out: dict[str, float] = {}
    for spec in specs:
        name, _, boost_text = spec.partition("^")
        boost = float(boost_text) if boost_text else 1.0
        names = ctx.mapping.resolve_fields(name) if "*" in name and ctx.mapping is not None else [name]
        for resolved in names:
            out[resolved] = out[resolved] * boost if resolved in out else boost
    return list(out.items())


def all_fields(specs: tuple[str, ...] | list[str]) -> bool:
    return any(s.partition("^")[0] == "*" for s in specs)
