"""Index administration (Elasticsearch's `indices` APIs): names and index expressions,
create/delete/get, mappings and settings, aliases, open/close, `_field_caps`, `_stats` and
`_analyze`. The engine of one index is `leafsearch.index`; this package decides what may change."""
