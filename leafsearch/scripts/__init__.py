"""Scripts: a subset of Painless (`painless.py`, `runtime.py`), the `script` option of requests and
stored scripts (`service.py`). Used by updates, by-query operations and searches; what of Painless
is there is in docs/scripts.md."""
