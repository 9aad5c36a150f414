"""The engine of one index: `Index` -> `Shard` -> `Searcher` (a snapshot) -> immutable `Segment`s;
the mapping, analysis and dates that parse documents, the translog, commits, merges, routing, and
the files derived from segments. Knows no node, no HTTP and no request language beyond the typed
requests it is handed."""
