"""`indices.query.bool.max_clause_count`: how many clauses one query may hold, as Lucene counts them.

Lucene refuses a boolean query of more clauses than the limit when it is built
(`too_many_clauses`, which Elasticsearch reports as "failed to create query"), and a rewritten
query whose leaves, counted through every nesting, exceed it (`too_many_nested_clauses`, reported
since Elasticsearch 8.15 as the 400 "Query rewrite failed: too many clauses"). Leaves are what
Lucene counts: a term, a phrase, a term set, a range, one pattern (its constant-score rewrite is one
leaf whatever the terms it expands to) and each term of a fuzzy expansion. The check runs on the
plan, before any segment is searched, so a query of 20,000 terms costs its planning and no arrays.
"""

from __future__ import annotations

from typing import Any

from leafsearch.errors import ElasticError, QueryShardError
from leafsearch.search.query.context import QueryContext, failed
from leafsearch.search.query.plans import BoolPlan, ConstPlan, DisMaxPlan


def too_many_clauses(ctx: QueryContext) -> QueryShardError:
    """Lucene's TooManyClauses, raised while a boolean query is built."""
    return failed(ctx, "too_many_clauses", f"maxClauseCount is set to {ctx.max_clause_count}")


def check_clauses(ctx: QueryContext, count: int) -> None:
    """Refuse a boolean query of `count` direct clauses past the limit (before building them)."""
    if count > ctx.max_clause_count:
        raise too_many_clauses(ctx)


def check_nested_clauses(plan: Any, ctx: QueryContext) -> None:
    """Refuse a plan whose leaves, through every nesting, exceed the limit."""
    limit = ctx.max_clause_count
    leaves = 0
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, BoolPlan):
            stack.extend((*node.must, *node.should, *node.filter, *node.must_not))
        elif isinstance(node, DisMaxPlan):
            stack.extend(node.queries)
        elif isinstance(node, ConstPlan):
            stack.append(node.inner)
        else:
            leaves += 1
            if leaves > limit:
                raise _too_many_nested(limit)


def _too_many_nested(limit: int) -> ElasticError:
    cause = ElasticError(
        f"Query contains too many nested clauses; maxClauseCount is set to {limit}",
        error_type="too_many_nested_clauses",
        status=400,
    )
    error = ElasticError(
        "Query rewrite failed: too many clauses",
        error_type="illegal_argument_exception",
        status=400,
        caused_by=cause,
    )
    error.root_is_self = True
    return error
