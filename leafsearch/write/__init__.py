"""The write path: document writes and realtime gets (`documents.py`), bulk requests parsed in the
server or a worker (`bulk_request.py`, `bulk_metadata.py`, `bulk_offload.py`), and the by-query
operations and reindex (`by_query*.py`). What must be ordered (ids, versions, seq_no, translog)
happens in the index's shards (`leafsearch.index`)."""
