"""tests/node/test_durability.py against a Ray-backed node (conftest.py says how)."""

from tests.node.test_durability import *  # noqa: F403
