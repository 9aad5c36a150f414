"""Query execution, split by step: `context` (what a query needs from its shard), `plans` (the
plan nodes), planning against the shard's mapping (`fields`, `values`, `term_queries`,
`text_queries`, `fuzzy`, `rewrites`, `planner`), then running plans over one segment
(`term_selection`, `masks`, `term_exec`, `phrase_exec`, `executor`).

`leafsearch.search.matching` is the public entry point.
"""
