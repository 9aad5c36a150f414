"""Node start-up after crashes around index creation and deletion."""

from __future__ import annotations

from leafsearch import Node
from leafsearch.index.index import DELETED_PREFIX
from leafsearch.index.mapping import Mapping


def test_interrupted_deletion_and_creation_are_cleaned_up(tmp_path):
    with Node(tmp_path, background=False) as node:
        node.create_index("keep", {}, Mapping.from_body(None))
        node.index_doc("keep", "1", b'{"a": 1}', refresh="true")
        doomed = node.create_index("doomed", {}, Mapping.from_body(None))
        doomed_folder = doomed.folder
    indices = tmp_path / "indices"
    # A crash after the atomic rename of a deletion, and one in the middle of a creation.
    half_deleted = indices / (DELETED_PREFIX + doomed_folder.name)
    doomed_folder.rename(half_deleted)
    (indices / "halfmade").mkdir()
    with Node(tmp_path, background=False) as node:
        assert sorted(node.indices) == ["keep"]
        assert node.get_doc("keep", "1")["_source"].parsed() == {"a": 1}
    assert not half_deleted.exists()
    assert not (indices / "halfmade").exists()


def test_deleted_index_leaves_no_folder(tmp_path):
    with Node(tmp_path, background=False) as node:
        index = node.create_index("gone", {}, Mapping.from_body(None))
        node.index_doc("gone", "1", b'{"a": 1}')
        folder = index.folder
        node.drop_index("gone")
        assert not folder.exists()
        assert not any(p.name.startswith(DELETED_PREFIX) for p in (tmp_path / "indices").iterdir())
