"""The user's cache of the external tests' tools (tests/clients/installed_tools.py): each install
made once for what it is installed from, again for other inputs or after one cut short, and a
checkout's folder replaced by a link to it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from installed_tools import FOLDER_VARIABLE, installed, link


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(FOLDER_VARIABLE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_an_install_is_made_once_for_its_inputs_even_asked_at_once(cache: Path) -> None:
    made: list[Path] = []
    lock = threading.Lock()

    def install(folder: Path) -> None:
        with lock:
            made.append(folder)
        (folder / "tool").write_text("v1")

    folders: list[Path] = []

    def ask() -> None:
        folders.append(installed("t", [b"pins"], install))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and set(folders) == {made[0]}
    assert made[0].parent == cache and (made[0] / "tool").read_text() == "v1"
    other = installed("t", [b"other pins"], install)
    assert len(made) == 2 and other != made[0] and (made[0] / "tool").exists()


def test_an_install_cut_short_is_made_again_from_an_empty_folder(cache: Path) -> None:
    def fails(folder: Path) -> None:
        (folder / "half").write_text("")
        raise RuntimeError("the network went away")

    with pytest.raises(RuntimeError):
        installed("t", [b"pins"], fails)
    seen: list[list[str]] = []
    folder = installed("t", [b"pins"], lambda f: seen.append(sorted(p.name for p in f.iterdir())))
    assert seen == [[]] and (folder / ".installed").exists()


def test_a_checkouts_folder_becomes_a_link_to_the_cached_one(tmp_path: Path) -> None:
    target = tmp_path / "cache" / "node_modules"
    target.mkdir(parents=True)
    at = tmp_path / "checkout" / "node_modules"
    (at / "old-package").mkdir(parents=True)  # installed in the checkout, from before the cache
    link(at, target)
    assert at.is_symlink() and at.readlink() == target
    link(at, target)  # again: unchanged
    other = tmp_path / "cache2" / "node_modules"
    other.mkdir(parents=True)
    link(at, other)
    assert at.readlink() == other and [p.name for p in at.parent.iterdir()] == ["node_modules"]
