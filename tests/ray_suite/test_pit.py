"""tests/test_pit.py against a Ray-backed node (conftest.py says how)."""

from test_pit import *  # noqa: F403
