"""`percolator` fields: a document holds a query, which the `percolate` query runs against the
documents it is given (search/query/percolate_queries.py).

The query is checked when the document is indexed, as Elasticsearch checks it: it must parse, and
every field it names must be mapped (Elasticsearch's `index.percolator.map_unmapped_fields_as_text`
is false by default). It is kept as one term of a keyword column, its JSON as sent, so that each
segment holds every distinct stored query once and a percolation plans each of them once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson

from leafsearch.errors import ElasticError
from leafsearch.index.mapping import METADATA_FIELDS, FieldType, _FieldError, _Malformed
from leafsearch.index.parsed import ParsedDoc
from leafsearch.request.query_dsl import Exists, Query, parse_query, queries_within


class PercolatorField(FieldType):
    """A `percolator` field: one query per document."""

    __slots__ = ("mapping",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.doc_values = False
        self.index = False  # searched through the `percolate` query only (not in `_field_caps`)
        self.mapping: Any = None  # the mapping holding this field (`bind`)
        self.parse = self._parse_query

    def bind(self, mapping: Any, analyzer: Any) -> None:
        """The mapping's hook: the mapping the stored queries' fields are looked up in."""
        self.mapping = mapping

    def _parse_query(self, value: Any, doc: ParsedDoc) -> None:
        if value is None:
            return
        if self.path in doc.keyword or type(value) is list:
            raise _FieldError(self, value, _Malformed("a document can only contain one percolator query"))
        try:
            query = parse_query(value)
        except ElasticError as e:
            raise _FieldError(self, value, _Malformed(e.reason, e.error_type)) from None
        for name in unmapped_fields(query, self.mapping):
            message = f"No field mapping can be found for the field with name [{name}]"
            raise _FieldError(self, value, _Malformed(message, "query_shard_exception"))
        doc.keyword[self.path] = [orjson.dumps(value).decode()]


def unmapped_fields(query: Query, mapping: Any) -> Iterator[str]:
    """The fields a query names that the mapping lacks (patterns, metadata fields and `exists`
    aside, as Elasticsearch resolves them without a mapping)."""
    for node in queries_within(query):
        name = getattr(node, "field", None)
        if not isinstance(name, str) or isinstance(node, Exists) or "*" in name or name in METADATA_FIELDS:
            continue
        if mapping is not None and mapping.field(name) is None:
            yield name
