"""tests/search/test_collapse.py against a Ray-backed node (conftest.py says how)."""

from collections.abc import Iterator

import pytest

import leafsearch
from tests.ray_cluster import LocalCluster
from tests.search.test_collapse import *  # noqa: F403


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, ray_suite_cluster: LocalCluster
) -> Iterator[leafsearch.Node]:
    """The module's `node`, coordinating shard actors on the folder's Ray cluster (its collapsed
    pages are rounds on the actors' contexts, collapse_shards.py)."""
    with leafsearch.Node(
        tmp_path_factory.mktemp("collapse-node"), background=False, ray=ray_suite_cluster.address
    ) as instance:
        yield instance
        for name in list(instance.indices):
            instance.drop_index(name)
