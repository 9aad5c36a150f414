"""A bool's required clauses that score nothing (its filters, and its musts when nothing is scored),
evaluated on the documents of its most selective clause instead of over the whole segment.

Why: a `term` plus a `range` filter, the commonest filtered search, built one mask per clause over
every document of every segment, O(n) each. When one clause is a term with a posting list (keyword
postings, see `KeywordColumn.postings`, or text postings) holding few of the segment's documents,
that list leads: every other clause is tested on its documents only (their values gathered), so
the conjunction costs O(matches of the leading term). A clause without such a test runs over the
segment as before and is read at the candidates, so any clause may follow, and the documents are
exactly those the dense conjunction gives (`tests/test_conjunction.py` compares both).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from leafsearch.index.columns import KeywordColumn, NumericColumn, TextColumn
from leafsearch.index.searcher import SegmentView
from leafsearch.search.query.plans import NumRange, ScoredTerm
from leafsearch.search.query.term_exec import range_test

#: A term leads when it holds fewer than one document of the segment in this many: testing a
#: candidate (a gather, a comparison and a scatter into the mask, about 5 ns) then costs less than
#: comparing every document once per clause (about 0.4 ns per document for a term and a range).
LEAD_FRACTION = 16

_NO_DOCS = np.empty(0, dtype=np.int32)


def conjunction_docs(
    clauses: list[Any], view: SegmentView, dense: Callable[[Any], np.ndarray]
) -> np.ndarray | None:
    """The documents (ascending) matching every clause, or None when no clause is a term holding
    few enough documents to lead (the caller then builds one mask per clause). `dense(clause)` is
    the clause's mask over the whole segment, for clauses with no test on candidates."""
    lead: tuple[int, np.ndarray] | None = None
    for i, clause in enumerate(clauses):
        docs = _posted_docs(clause, view)
        if docs is not None and (lead is None or len(docs) < len(lead[1])):
            lead = (i, docs)
    if lead is None or len(lead[1]) * LEAD_FRACTION > view.max_doc:
        return None
    first, docs = lead
    # Postings are stored narrow (int32 or less); numpy gathers with a native index take about
    # half the time, and every other clause gathers at these documents.
    docs = docs.astype(np.intp, copy=False)
    for i, clause in enumerate(clauses):
        if i != first and len(docs):
            docs = docs[_test(clause, view, docs, dense)]
    return docs


def _posted_docs(clause: Any, view: SegmentView) -> np.ndarray | None:
    """The documents (ascending) of a term clause, straight from its postings: O(1) to find,
    O(matches) to read. None for any other clause."""
    if not isinstance(clause, ScoredTerm) or clause.kind not in ("keyword", "text"):
        return None
    col = view.segment.column(clause.field)
    if clause.kind == "text":
        return np.asarray(col.postings(clause.term)[0]) if isinstance(col, TextColumn) else _NO_DOCS
    if not isinstance(col, KeywordColumn):
        return _NO_DOCS
    ordinal = col.lookup(str(clause.term))
    return col.docs_of(ordinal, ordinal + 1) if ordinal >= 0 else _NO_DOCS


def _test(clause: Any, view: SegmentView, docs: np.ndarray, dense: Callable[[Any], np.ndarray]) -> np.ndarray:
    """Whether each candidate matches the clause: single-valued ranges and keyword terms from the
    candidates' values (O(candidates)), anything else from the clause's whole mask."""
    col = view.segment.column(clause.field) if isinstance(clause, NumRange | ScoredTerm) else None
    if isinstance(clause, NumRange) and isinstance(col, NumericColumn) and col.doc_values.is_single:
        test = range_test(clause, view)
        if test is False:
            return np.zeros(len(docs), dtype=bool)
        present = col.doc_values.present[docs]
        return present if test is True else test(np.asarray(col.doc_values.values)[docs]) & present
    if (
        isinstance(clause, ScoredTerm)
        and clause.kind == "keyword"
        and isinstance(col, KeywordColumn)
        and col.ords.is_single
    ):
        ordinal = col.lookup(str(clause.term))
        if ordinal < 0:
            return np.zeros(len(docs), dtype=bool)
        return (np.asarray(col.ords.stored)[docs] == ordinal) & col.ords.present[docs]
    return dense(clause)[docs]
