"""`inner_hits` of `has_child` and `has_parent` queries: for each hit of the page, the documents
on the other side of its relation that the query's inner query matches, as Elasticsearch's
ParentChildInnerHitContextBuilder finds them: the children of a parent hit, the parent of a
child hit. Each is a search of the hit's index on the page's snapshots (collapse.py's
`inner_hits_search`), one per hit and definition, as Elasticsearch runs one per hit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.errors import IllegalArgument
from leafsearch.request.join_queries import HasChild, HasParent
from leafsearch.request.query_dsl import Bool, Ids, Query, Term, outermost
from leafsearch.search.collapse import check_inner_window, inner_hits_search

if TYPE_CHECKING:
    from leafsearch.request.search_types import SearchRequest
    from leafsearch.search.hitlist import HitList
    from leafsearch.search.services import SearchServices


def join_inner_hits(query: Query) -> list[HasChild | HasParent]:
    """The join queries of a query tree that ask for inner hits, outside any other join query;
    400 for two definitions of one name. One inside another's query shows within the other's
    inner hits (their search decorates its hits in turn), as Elasticsearch nests them; one inside
    a join query without inner hits shows nowhere, as in Elasticsearch."""
    found = [q for q in outermost(query, (HasChild, HasParent)) if q.inner_hits is not None]
    names = [q.inner_hits.name for q in found]  # type: ignore[union-attr]
    for name in names:
        if names.count(name) > 1:
            raise IllegalArgument(f"[inner_hits] already contains an entry for key [{name}]")
    return found[::-1]


def decorate(
    services: SearchServices, hitlist: HitList, request: SearchRequest, hits: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The page's hits, each with the `inner_hits` of every join query asking for them."""
    queries = join_inner_hits(request.query)
    for target in {id(t.index): t for t in hitlist.targets}.values():
        for q in queries:
            check_inner_window(target, q.inner_hits)  # type: ignore[arg-type]
    out = []
    for hit in hits:
        targets = [t for t in hitlist.targets if t.index.name == hit["_index"]]
        join = targets[0].mapping.join if targets else None
        shown = {}
        for q in queries:
            inner = q.inner_hits
            assert inner is not None
            query = _other_side(q, join, hit["_id"])
            if query is None:
                empty = {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []}
                shown[inner.name] = {"hits": empty}
            else:
                shown[inner.name] = inner_hits_search(services, targets, request, inner, query)
        out.append({**hit, "inner_hits": {**hit.get("inner_hits", {}), **shown}})
    return out


def _other_side(q: HasChild | HasParent, join: Any, hit_id: str) -> Query | None:
    """The query finding a hit's relatives that `q`'s inner query matches; None when the hit's
    index maps no such relation."""
    if join is None:
        return None
    if isinstance(q, HasChild):
        parent = join.relations.parent_of.get(q.type)
        if parent is None:
            return None
        link = (Term(join.path, q.type), Term(join.id_field(parent), hit_id))
        return Bool(must=(q.query,), filter=link)
    children = join.relations.children_of.get(q.parent_type)
    if children is None:
        return None
    of_hit = tuple(HasChild(child, Ids((hit_id,))) for child in children)
    return Bool(must=(q.query,), filter=(Term(join.path, q.parent_type), Bool(should=of_hit)))
