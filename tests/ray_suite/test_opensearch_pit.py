"""tests/test_opensearch_pit.py against a Ray-backed node (conftest.py says how)."""

from test_opensearch_pit import *  # noqa: F403
