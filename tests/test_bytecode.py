"""tests/bytecode.py: each xdist worker's share of the test modules' assertion rewriting, and the
packages' bytecode written once at the run's start."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from _pytest.assertion.rewrite import PYC_TAIL, _read_pyc

from tests.bytecode import compile_packages, find_test_modules, rewrite_share


def _module(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"def test_it():\n    x = {len(path.name)}\n    assert x == 0\n")
    return path


def _pyc(module: Path) -> Path:
    return module.parent / "__pycache__" / (module.name[:-3] + PYC_TAIL)


def test_the_test_modules_are_found_outside_hidden_and_tool_folders(tmp_path: Path) -> None:
    kept = [_module(tmp_path / "test_a.py"), _module(tmp_path / "sub" / "test_b.py")]
    _module(tmp_path / ".venv" / "lib" / "test_c.py")
    _module(tmp_path / "js" / "node_modules" / "x" / "test_d.py")
    (tmp_path / "helper.py").write_text("")
    alone = _module(tmp_path / "other" / "test_e.py")
    assert find_test_modules([tmp_path]) == sorted(kept + [alone])
    assert find_test_modules([alone, tmp_path / "sub"]) == [alone, kept[1]]


def test_a_worker_rewrites_its_share_as_pytest_reads_it(
    tmp_path: Path, pytestconfig: pytest.Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    modules = [_module(tmp_path / f"test_{i}.py") for i in range(5)]
    assert rewrite_share(pytestconfig, modules, 1, 2) == 2
    assert [_pyc(m).exists() for m in modules] == [False, True, False, True, False]
    code = _read_pyc(modules[1], _pyc(modules[1]))
    assert code is not None
    namespace: dict = {}
    exec(code, namespace)
    with pytest.raises(AssertionError, match="assert 9 == 0"):  # rewritten: the values are shown
        namespace["test_it"]()
    assert rewrite_share(pytestconfig, modules, 1, 2) == 0  # cached already
    # Under PYTHONDONTWRITEBYTECODE too (pytest reads what it would not write).
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert rewrite_share(pytestconfig, modules, 0, 2) == 3
    assert all(_pyc(m).exists() for m in modules)
    assert _read_pyc(modules[0], _pyc(modules[0])) is not None


def test_the_packages_bytecode_is_written_even_where_python_writes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `PYTHONDONTWRITEBYTECODE` (`sys.dont_write_bytecode`), the package's modules and the
    tests' helpers get their cache; test modules (pytest rewrites
    them) and the tools' folders do not; a current cache is not written again."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    compiled = [tmp_path / "leafsearch" / "__init__.py", tmp_path / "leafsearch" / "sub" / "mod.py"]
    compiled.append(tmp_path / "tests" / "helper.py")
    left = [tmp_path / "tests" / "test_a.py", tmp_path / "tests" / "clients" / ".venv" / "lib" / "x.py"]
    left.append(tmp_path / "tests" / "js" / "node_modules" / "y.py")
    for path in compiled + left:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"NAME = {path.stem!r}\n")
    compile_packages(tmp_path)
    caches = [Path(importlib.util.cache_from_source(str(path))) for path in compiled + left]
    assert [cache.exists() for cache in caches] == [True] * len(compiled) + [False] * len(left)
    written = [cache.stat().st_mtime_ns for cache in caches[: len(compiled)]]
    compile_packages(tmp_path)
    assert [cache.stat().st_mtime_ns for cache in caches[: len(compiled)]] == written
