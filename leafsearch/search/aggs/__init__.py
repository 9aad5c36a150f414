"""Aggregations, split by family: `base` (the tree and its contract), `values` (reading doc values
of a segment for (document, parent bucket) pairs), `grouping` (bucket partials that merge across
segments and shards), then one module per family of aggregation and `parse` (the registry).

`leafsearch.search.aggregations` is the public entry point.
"""
