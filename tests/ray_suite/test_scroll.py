"""tests/test_scroll.py against a Ray-backed node (conftest.py says how)."""

from test_scroll import *  # noqa: F403
