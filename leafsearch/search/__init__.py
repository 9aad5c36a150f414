"""Search: the coordinator's entry points (search, count, PIT, scroll, `_msearch`), the reader
contexts, the query and fetch phases per shard snapshot, matching (`query/`), sorting, slicing,
aggregations (`aggs/`) and the search worker processes (`workers/`). Takes what it uses as a
`SearchServices` (`services.py`), never the node."""
