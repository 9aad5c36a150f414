"""`leafsearch export` and `leafsearch import`: moving an index's documents to and from NDJSON files
through any Elasticsearch-compatible HTTP API (a running leafsearch, Elasticsearch, OpenSearch) or
a data folder opened in-process (`local.py`)."""
