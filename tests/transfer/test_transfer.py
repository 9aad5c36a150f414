"""`leafsearch export` and `leafsearch import`, run as a user runs them (a subprocess) against the
session's server and against a data folder."""

from __future__ import annotations

import gzip
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
import zstandard
from conftest import REPO, running_server, server_env

from bench.generate import MAPPING, generate

N = 100_000


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m leafsearch ARGS` to completion."""
    done = subprocess.run(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        timeout=600,
    )
    if check:
        assert done.returncode == 0, done.stderr.decode()
    return done


def read_lines(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    elif path.suffix == ".zst":
        data = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True).read()
    return data.splitlines()


def documents(lines: list[bytes]) -> dict[str, bytes]:
    """`_id` -> canonical `_source` bytes, checking that no `_id` appears twice."""
    docs: dict[str, bytes] = {}
    for line in lines:
        record = orjson.loads(line)
        assert record["_id"] not in docs, f"{record['_id']} exported twice"
        docs[record["_id"]] = orjson.dumps(record["_source"], option=orjson.OPT_SORT_KEYS)
    return docs


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, bytes]]:
    """100,000 export records on disk, the mapping file, and the documents they hold."""
    folder = tmp_path_factory.mktemp("transfer")
    generated = generate(N)
    lines = [
        f'{{"_index":"src","_id":"{i}","_source":{s}}}'.encode()
        for i, s in zip(generated.ids, generated.sources, strict=True)
    ]
    records = folder / "docs.ndjson"
    records.write_bytes(b"\n".join(lines) + b"\n")
    mapping = folder / "mapping.json"
    mapping.write_bytes(orjson.dumps(MAPPING))
    return records, mapping, documents(lines)


@pytest.fixture(scope="module")
def loaded(server: str, dataset: tuple[Path, Path, dict[str, bytes]]) -> Iterator[str]:
    """An index of the session's server holding the 100,000 documents, imported by the CLI."""
    records, mapping, _ = dataset
    name = "transfer-source"
    cli("import", str(records), name, "--url", server, "--mapping", str(mapping), "--workers", "2")
    yield name
    httpx.delete(f"{server}/{name}", timeout=60)


def test_round_trip_with_slices_and_compression(
    server: str, loaded: str, dataset: tuple[Path, Path, dict[str, bytes]], tmp_path: Path
) -> None:
    _, _, expected = dataset
    exported = tmp_path / "slices.ndjson.zst"
    cli("export", loaded, str(exported), "--url", server, "--slices", "4")
    assert documents(read_lines(exported)) == expected
    # ... and back into a new index, then out again through one gzip stream
    cli("import", str(exported), "transfer-copy", "--url", server)
    try:
        assert httpx.get(f"{server}/transfer-copy/_count", timeout=60).json()["count"] == N
        again = tmp_path / "copy.ndjson.gz"
        cli("export", "transfer-copy", str(again), "--url", server)
        assert documents(read_lines(again)) == expected
    finally:
        httpx.delete(f"{server}/transfer-copy", timeout=60)


def test_slices_as_separate_files(server: str, loaded: str, dataset, tmp_path: Path) -> None:
    _, _, expected = dataset
    cli("export", loaded, str(tmp_path / "part.ndjson.gz"), "--url", server, "--slices", "3", "--split")
    parts = [tmp_path / f"part.{i}.ndjson.gz" for i in range(3)]
    lines = [line for part in parts for line in read_lines(part)]
    assert all(read_lines(part) for part in parts)  # each slice got documents
    assert documents(lines) == expected


def test_export_to_stdout_with_a_query_and_source_filtering(server: str, loaded: str) -> None:
    query = '{"term": {"service": "svc-01"}}'
    done = cli("export", loaded, "--url", server, "--query", query, "--source", "service,bytes")
    lines = done.stdout.splitlines()
    count = httpx.post(f"{server}/{loaded}/_count", json={"query": orjson.loads(query)}, timeout=60).json()[
        "count"
    ]
    assert 0 < len(lines) == count
    assert {tuple(sorted(orjson.loads(line)["_source"])) for line in lines} == {("bytes", "service")}
    assert b"exported" in done.stderr  # the summary; no progress bar off a terminal
    assert b"\x1b[" not in done.stderr


def _state(path: Path) -> dict | None:
    try:
        return orjson.loads(Path(str(path) + ".export-state.json").read_bytes())
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None


@pytest.mark.parametrize("suffix", [".ndjson", ".ndjson.gz"])
def test_interrupted_export_resumes_without_gaps_or_repeats(
    server: str, loaded: str, dataset, tmp_path: Path, suffix: str
) -> None:
    _, _, expected = dataset
    output = tmp_path / f"resumed{suffix}"
    args = ["export", loaded, str(output), "--url", server, "--size", "100", "--slices", "2"]
    process = subprocess.Popen([sys.executable, "-m", "leafsearch", *args], cwd=REPO, env=server_env())
    try:
        # Killed once the state file records a fifth of the documents written.
        deadline = time.monotonic() + 120
        while (state := _state(output)) is None or sum(state["written"]) < N // 5:
            assert process.poll() is None, "the export ended before it could be interrupted"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    state = _state(output)
    assert state is not None and sum(state["written"]) < N
    # Pages may have reached the file after the last state (here: a torn one): resuming cuts them off.
    with open(output, "ab") as torn:
        torn.write(b'{"_index": "transfer-source", "_id": "00000')
    cli("export", loaded, str(output), "--url", server, "--resume")
    assert documents(read_lines(output)) == expected
    assert _state(output) is None  # finished: the state file is gone
    assert cli("export", loaded, str(output), "--url", server, "--resume", check=False).returncode == 1


def test_resume_after_the_point_in_time_expired_is_refused(server: str, loaded: str, tmp_path: Path) -> None:
    output = tmp_path / "expired.ndjson"
    args = ["export", loaded, str(output), "--url", server, "--size", "100"]
    process = subprocess.Popen([sys.executable, "-m", "leafsearch", *args], cwd=REPO, env=server_env())
    try:
        deadline = time.monotonic() + 120
        while (state := _state(output)) is None or sum(state["written"]) == 0:
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    httpx.request("DELETE", f"{server}/_pit", json={"id": _state(output)["pit_id"]}, timeout=60)
    done = cli("export", loaded, str(output), "--url", server, "--resume", check=False)
    assert done.returncode == 1
    assert b"point in time is gone" in done.stderr
    assert b"Traceback" not in done.stderr


def test_export_and_import_on_a_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    docs = [{"n": i, "tag": f"t{i % 7}"} for i in range(2_500)]
    plain = tmp_path / "plain.ndjson"
    plain.write_bytes(b"".join(orjson.dumps(doc) + b"\n" for doc in docs))
    data.mkdir()
    cli("import", str(plain), "local", "--data", str(data))
    with running_server(data) as (url, _):
        assert httpx.get(f"{url}/local/_count", timeout=60).json()["count"] == len(docs)
        # the running server holds the folder: the commands refuse it rather than read under it
        refused = cli("export", "local", str(tmp_path / "x.ndjson"), "--data", str(data), check=False)
        assert refused.returncode == 1
        assert b"in use by another leafsearch node" in refused.stderr
        httpx.post(f"{url}/local/_doc/extra?refresh=true", json={"n": -1, "tag": "extra"}, timeout=60)
    output = tmp_path / "local.ndjson"
    cli("export", "local", str(output), "--data", str(data), "--slices", "2")
    exported = [orjson.loads(line)["_source"] for line in read_lines(output)]
    assert sorted(exported, key=lambda doc: doc["n"]) == [{"n": -1, "tag": "extra"}, *docs]


def test_import_reports_each_failed_item_and_exits_1(server: str, tmp_path: Path) -> None:
    mapping = tmp_path / "mapping.json"
    mapping.write_text('{"properties": {"n": {"type": "integer"}}}')
    lines = [
        b'{"index": {"_id": "a"}}',
        b'{"n": 1}',
        b'{"index": {"_id": "b", "_index": "elsewhere"}}',
        b'{"n": "not a number"}',
        b'{"create": {"_id": "a"}}',
        b'{"n": 2}',
        b"{not json",
        b'{"delete": {"_id": "missing"}}',
    ]
    source = tmp_path / "bulk.ndjson"
    source.write_bytes(b"\n".join(lines) + b"\n")
    done = cli(
        "import", str(source), "transfer-errors", "--url", server, "--mapping", str(mapping), check=False
    )
    try:
        assert done.returncode == 1
        errors = [
            orjson.loads(line) for line in Path(str(source) + ".errors.ndjson").read_bytes().splitlines()
        ]
        by_line = {error["line"]: error for error in errors}
        assert set(by_line) == {3, 5, 7}
        assert by_line[3]["error"]["type"] == "document_parsing_exception"
        assert by_line[5]["status"] == 409
        assert by_line[5]["error"]["type"] == "version_conflict_engine_exception"
        assert by_line[7]["error"]["type"] == "parse_exception"
        assert b"2 items imported, 3 failed" in done.stderr  # the delete of a missing id is no failure
        # `_index` in the file does not redirect a document: INDEX is where everything goes
        assert httpx.head(f"{server}/elsewhere", timeout=60).status_code == 404
        got = httpx.get(f"{server}/transfer-errors/_doc/a", timeout=60).json()
        assert got["_source"] == {"n": 1}
    finally:
        httpx.delete(f"{server}/transfer-errors", timeout=60)


def test_import_of_gzip_and_of_standard_input(server: str, tmp_path: Path) -> None:
    docs = [{"n": i} for i in range(1_234)]
    lines = b"".join(orjson.dumps(doc) + b"\n" for doc in docs)
    packed = tmp_path / "plain.ndjson.gz"
    packed.write_bytes(gzip.compress(lines))
    try:
        cli("import", str(packed), "transfer-gz", "--url", server, "--chunk", "100")
        piped = subprocess.run(
            [sys.executable, "-m", "leafsearch", "import", "-", "transfer-stdin", "--url", server],
            cwd=REPO,
            env=server_env(),
            input=lines,
            capture_output=True,
            timeout=300,
        )
        assert piped.returncode == 0, piped.stderr.decode()
        for index in ("transfer-gz", "transfer-stdin"):
            body = {"size": 0, "aggs": {"n": {"sum": {"field": "n"}}}}
            answer = httpx.post(f"{server}/{index}/_search", json=body, timeout=60).json()
            assert answer["hits"]["total"]["value"] == len(docs)
            assert answer["aggregations"]["n"]["value"] == sum(range(len(docs)))
    finally:
        httpx.delete(f"{server}/transfer-gz,transfer-stdin", timeout=60)
