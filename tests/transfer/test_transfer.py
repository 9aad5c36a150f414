"""`leafsearch export` and `leafsearch import`, run as a user runs them (a subprocess) against the
session's server and against a data folder."""

from __future__ import annotations

import gzip
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import orjson
import pytest
import zstandard
from conftest import REPO, running_server, server_env

from bench.generate import MAPPING, generate
from leafsearch.transfer.importer import ImportState, file_identity, save_import_state
from tests import web
from tests.server_zygote import SERVER_ZYGOTE

#: Documents of the module's index: enough for several pages (1,000 each) in every slice of an
#: export and several chunks of an import, so that a kill or Ctrl-C lands between them.
N = 30_000


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`python -m leafsearch ARGS` to completion."""
    done = SERVER_ZYGOTE.run(
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
    """`N` export records on disk, the mapping file, and the documents they hold."""
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
    """An index of the session's server holding the `N` documents, imported by the CLI."""
    records, mapping, _ = dataset
    name = "transfer-source"
    cli("import", str(records), name, "--url", server, "--mapping", str(mapping), "--workers", "2")
    yield name
    web.delete(f"{server}/{name}", timeout=60)


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
        assert web.get(f"{server}/transfer-copy/_count", timeout=60).json()["count"] == N
        again = tmp_path / "copy.ndjson.gz"
        cli("export", "transfer-copy", str(again), "--url", server)
        assert documents(read_lines(again)) == expected
    finally:
        web.delete(f"{server}/transfer-copy", timeout=60)


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
    count = web.post(f"{server}/{loaded}/_count", json={"query": orjson.loads(query)}, timeout=60).json()[
        "count"
    ]
    assert 0 < len(lines) == count
    assert {tuple(sorted(orjson.loads(line)["_source"])) for line in lines} == {("bytes", "service")}
    assert b"exported" in done.stderr  # the summary; no progress bar off a terminal
    assert b"\x1b[" not in done.stderr


@contextmanager
def proxy_to(
    server: str, forward: Callable[[BaseHTTPRequestHandler, httpx.Client, bytes], None]
) -> Iterator[str]:
    """A proxy to `server` on loopback (its URL) whose every request, its body read, is answered
    by `forward(handler, upstream client, body)`; HTTP/1.0: a body ends where its connection
    closes."""
    upstream = web.Client(base_url=server, timeout=120)

    class Proxy(BaseHTTPRequestHandler):
        def _forward(self) -> None:
            forward(self, upstream, self.rfile.read(int(self.headers.get("content-length") or 0)))

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

        def log_message(self, *_: object) -> None:
            pass

    proxy = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{proxy.server_address[1]}"
    finally:
        proxy.shutdown()
        proxy.server_close()
        upstream.close()


@contextmanager
def holding_the_streams(server: str, limit: int) -> Iterator[str]:
    """A proxy to `server` (its URL) that relays each `_export` stream until `limit` bytes of it
    went through, then holds it (an export through it cannot end) until the block ends."""
    released = threading.Event()

    def forward(handler: BaseHTTPRequestHandler, upstream: httpx.Client, body: bytes) -> None:
        headers = {"content-type": handler.headers.get("content-type", "application/json")}
        stream = handler.path.split("?")[0].endswith("/_export")
        relayed = 0
        with upstream.stream(handler.command, handler.path, content=body, headers=headers) as answer:
            handler.send_response(answer.status_code)
            handler.send_header("content-type", answer.headers.get("content-type", "application/json"))
            handler.end_headers()
            for chunk in answer.iter_raw():
                relayed += len(chunk)
                if stream and relayed >= limit:
                    released.wait()
                    return
                handler.wfile.write(chunk)

    try:
        with proxy_to(server, forward) as url:
            yield url
    finally:
        released.set()


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
    # Each slice's stream held once it carried 60% of its half of the sources' bytes: the export
    # cannot end before it is killed, once the state file records a fifth of the documents written.
    with holding_the_streams(server, sum(map(len, expected.values())) * 3 // 10) as url:
        args = ["export", loaded, str(output), "--url", url, "--size", "100", "--slices", "2"]
        process = SERVER_ZYGOTE.popen([sys.executable, "-m", "leafsearch", *args], cwd=REPO, env=server_env())
        try:
            assert _kill_when(process, lambda state: sum(state["written"]) >= N // 5, lambda: _state(output))
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
    process = SERVER_ZYGOTE.popen([sys.executable, "-m", "leafsearch", *args], cwd=REPO, env=server_env())
    try:
        assert _kill_when(process, lambda state: sum(state["written"]) > 0, lambda: _state(output))
    finally:
        if process.poll() is None:
            process.kill()
    web.request("DELETE", f"{server}/_pit", json={"id": _state(output)["pit_id"]}, timeout=60)
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
        assert web.get(f"{url}/local/_count", timeout=60).json()["count"] == len(docs)
        # the running server holds the folder: the commands refuse it rather than read under it
        refused = cli("export", "local", str(tmp_path / "x.ndjson"), "--data", str(data), check=False)
        assert refused.returncode == 1
        assert b"in use by another leafsearch node" in refused.stderr
        web.post(f"{url}/local/_doc/extra?refresh=true", json={"n": -1, "tag": "extra"}, timeout=60)
    output = tmp_path / "local.ndjson"
    cli("export", "local", str(output), "--data", str(data), "--slices", "2")
    exported = [orjson.loads(line)["_source"] for line in read_lines(output)]
    assert sorted(exported, key=lambda doc: doc["n"]) == [{"n": -1, "tag": "extra"}, *docs]
    # the folder, made by the test with its umask, and all the node wrote are the owner's alone
    for folder, dirs, files in os.walk(data):
        for name in dirs + files:
            path = Path(folder) / name
            assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path


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
        assert web.head(f"{server}/elsewhere", timeout=60).status_code == 404
        got = web.get(f"{server}/transfer-errors/_doc/a", timeout=60).json()
        assert got["_source"] == {"n": 1}
    finally:
        web.delete(f"{server}/transfer-errors", timeout=60)


def test_import_of_gzip_and_of_standard_input(server: str, tmp_path: Path) -> None:
    docs = [{"n": i} for i in range(1_234)]
    lines = b"".join(orjson.dumps(doc) + b"\n" for doc in docs)
    packed = tmp_path / "plain.ndjson.gz"
    packed.write_bytes(gzip.compress(lines))
    try:
        cli("import", str(packed), "transfer-gz", "--url", server, "--chunk", "100")
        piped = SERVER_ZYGOTE.run(
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
            answer = web.post(f"{server}/{index}/_search", json=body, timeout=60).json()
            assert answer["hits"]["total"]["value"] == len(docs)
            assert answer["aggregations"]["n"]["value"] == sum(range(len(docs)))
    finally:
        web.delete(f"{server}/transfer-gz,transfer-stdin", timeout=60)


def test_import_of_records_fast_and_parsed_chunk_by_chunk(server: str, tmp_path: Path) -> None:
    """Records as `leafsearch export` writes them (framed by whole-chunk rewrites) beside chunks
    that must be parsed line by line (a routing, a CRLF, an escaped `_source` key inside a source),
    a last line without a newline: every document arrives with its id, routing and source."""
    exact = [b'{"_index":"x","_id":"%d","_source":{"n":%d},"sort":[%d]}' % (i, i, i) for i in range(250)]
    odd = [
        b'{"_index":"x","_id":"r1","_routing":"k","_source":{"n":1000},"sort":[1]}',
        b'{"_index":"x","_id":"crlf","_source":{"n":1001},"sort":[2]}\r',
        b'{"_index":"x","_id":"nested","_source":{"n":1002,"o":{"a":"b","_source":{"c":1}}},"sort":[3]}',
        b'{"_index":"x","_id":"q\\"","_source":{"n":1003,"s":"}},\\"sort\\":[1]}\\n"},"sort":[4]}',
    ]
    lines = exact[:100] + odd + exact[100:]
    source = tmp_path / "mixed.ndjson"
    source.write_bytes(b"\n".join(lines))  # no newline after the last line
    index = "transfer-mixed"
    try:
        done = cli("import", str(source), index, "--url", server, "--chunk", "50", "--workers", "3")
        assert f"{len(lines):,} items imported, 0 failed" in done.stderr.decode()
        web.post(f"{server}/{index}/_refresh", timeout=60).raise_for_status()
        body = {"size": 1000, "query": {"match_all": {}}}
        hits = web.post(f"{server}/{index}/_search", json=body, timeout=60).json()["hits"]["hits"]
        got = {hit["_id"]: (hit.get("_routing"), hit["_source"]) for hit in hits}
        expected = {}
        for line in lines:
            record = orjson.loads(line)
            expected[record["_id"]] = (record.get("_routing"), record["_source"])
        assert got == expected
    finally:
        web.delete(f"{server}/{index}", timeout=60)


def test_resuming_a_bulk_file_whose_first_chunk_was_acknowledged(server: str, tmp_path: Path) -> None:
    """The format is the first line's even when the first chunk is skipped: the next chunk starts
    with the source of an action the first one holds (a delete shifts the pairs), which read alone
    would pass for a plain document."""
    lines = [
        b'{"delete":{"_id":"gone"}}',
        b'{"index":{"_id":"a"}}',
        b'{"n":1}',
        b'{"index":{"_id":"b"}}',
        b'{"n":2}',
        b'{"index":{"_id":"c"}}',
        b'{"n":3}',
    ]
    source = tmp_path / "bulk.ndjson"
    source.write_bytes(b"\n".join(lines) + b"\n")
    # an interrupted run of `--chunk 2` whose first chunk (the delete) the server acknowledged
    state = ImportState(str(source), "transfer-bulk-resume", "run1", 2, 10 << 20, file_identity(str(source)))
    state.acknowledge(0)
    save_import_state(state)
    index = "transfer-bulk-resume"
    try:
        done = cli("import", str(source), index, "--url", server, "--resume")
        assert "3 items imported, 0 failed" in done.stderr.decode()
        web.post(f"{server}/{index}/_refresh", timeout=60).raise_for_status()
        hits = web.post(f"{server}/{index}/_search", json={"size": 10}, timeout=60).json()["hits"]["hits"]
        assert {hit["_id"]: hit["_source"] for hit in hits} == {"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}}
    finally:
        web.delete(f"{server}/{index}", timeout=60)


# ---- the streaming endpoint, its fallback, and what a new user hit ----------------------------------


def open_contexts(server: str) -> int:
    stats = web.get(f"{server}/_nodes/stats/indices/search", timeout=60).json()["nodes"]
    return sum(node["indices"]["search"]["open_contexts"] for node in stats.values())


@contextmanager
def without_export_endpoint(server: str) -> Iterator[tuple[str, list[str]]]:
    """A proxy to `server` that answers `/_export` as Elasticsearch does (405), like a server
    without the streaming endpoint; yields its URL and the paths it forwarded."""
    seen: list[str] = []

    def forward(handler: BaseHTTPRequestHandler, upstream: httpx.Client, body: bytes) -> None:
        path = handler.path.split("?")[0]
        if path.endswith("/_export"):
            status, content = 405, b'{"error":"Incorrect HTTP method for uri [/_export]","status":405}'
        else:
            seen.append(path)
            headers = {"content-type": handler.headers.get("content-type", "application/json")}
            answer = upstream.request(handler.command, handler.path, content=body, headers=headers)
            status, content = answer.status_code, answer.content
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(content)))
        handler.end_headers()
        handler.wfile.write(content)

    with proxy_to(server, forward) as url:
        yield url, seen


def test_export_streams_from_the_endpoint_and_falls_back_to_pit_pages(
    server: str, loaded: str, dataset, tmp_path: Path
) -> None:
    _, _, expected = dataset
    streamed = tmp_path / "streamed.ndjson"
    cli("export", loaded, str(streamed), "--url", server, "--slices", "2")
    lines = read_lines(streamed)
    assert documents(lines) == expected
    assert all(b',"sort":[' in line for line in lines[:10])  # lines of the stream, as they came
    with without_export_endpoint(server) as (url, seen):
        paged = tmp_path / "paged.ndjson.zst"
        cli("export", loaded, str(paged), "--url", url, "--slices", "2")
    assert documents(read_lines(paged)) == expected
    assert seen.count("/_search") >= N // 1000  # pages of the PIT
    assert open_contexts(server) == 0


def _kill_when(
    process: subprocess.Popen, done: Callable[[dict], bool], state_of: Callable[[], dict | None]
) -> bool:
    """SIGKILLs `process` once its state file satisfies `done`; False if it ended first."""
    deadline = time.monotonic() + 120
    while process.poll() is None:
        state = state_of()
        if state is not None and done(state):
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=60)
            return True
        assert time.monotonic() < deadline
        time.sleep(0.002)
    return False


def _start(*args: str, interruptible: bool = False) -> subprocess.Popen:
    """`leafsearch ARGS` started; `interruptible`: with Ctrl-C's default action, as a command in
    a terminal's foreground has it, even when this run inherited SIGINT ignored (a background
    job of a script: a command there keeps it ignored, and a Ctrl-C does nothing)."""
    return SERVER_ZYGOTE.popen(
        [sys.executable, "-m", "leafsearch", *args],
        cwd=REPO,
        env=server_env(),
        stderr=subprocess.PIPE,
        preexec_fn=_default_sigint if interruptible else None,
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("suffix", [".ndjson", ".ndjson.zst"])
def test_export_killed_at_random_moments_resumes_exactly_once(
    server: str, loaded: str, dataset, tmp_path: Path, suffix: str
) -> None:
    _, _, expected = dataset
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    output = tmp_path / f"killed{suffix}"
    args = ["export", loaded, str(output), "--url", server]
    kills = 0
    process = _start(*args, "--slices", "3")  # resumed below without --slices: the saved plan's 3
    for _ in range(3):
        target = rng.randrange(1, N)
        if _kill_when(process, lambda state, t=target: sum(state["written"]) >= t, lambda: _state(output)):
            kills += 1
            process = _start(*args, "--resume")
        else:
            break
    assert process.wait(timeout=300) == 0, (seed, process.stderr.read().decode())
    process.stderr.close()
    assert documents(read_lines(output)) == expected, f"seed {seed}"
    assert _state(output) is None
    assert not Path(str(output) + ".export-state.json.tmp").exists()
    assert open_contexts(server) == 0, f"{kills} kills, seed {seed}"


def test_export_over_a_pit_ignores_concurrent_writes(server: str, dataset, tmp_path: Path) -> None:
    records, mapping, expected = dataset
    index = "transfer-live"
    cli("import", str(records), index, "--url", server, "--mapping", str(mapping))
    output = tmp_path / "live.ndjson.gz"
    stop = threading.Event()
    written: list[int] = []

    def write(worker: int) -> None:
        """New documents, updates and deletes of exported ones, refreshed, while the export runs."""
        rng = random.Random(worker)
        with web.Client(base_url=server, timeout=60) as http:
            while _state(output) is None and not stop.is_set():
                time.sleep(0.001)
            n = 0
            while not stop.is_set():
                victim = f"{rng.randrange(N):010d}"
                lines = [
                    orjson.dumps({"index": {"_id": f"new-{worker}-{n}"}}),
                    b'{"message": "written during the export"}',
                    orjson.dumps({"update": {"_id": victim}}),
                    b'{"doc": {"message": "changed during the export"}}',
                    orjson.dumps({"delete": {"_id": f"{rng.randrange(N):010d}"}}),
                ]
                http.post(
                    f"/{index}/_bulk?refresh=true",
                    content=b"\n".join(lines) + b"\n",
                    headers={"content-type": "application/x-ndjson"},
                )
                n += 1
            written.append(n)

    writers = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for writer in writers:
        writer.start()
    try:
        args = ["export", index, str(output), "--url", server]
        process = _start(*args, "--slices", "2")
        if _kill_when(process, lambda state: sum(state["written"]) >= N // 3, lambda: _state(output)):
            process = _start(*args, "--resume")
        assert process.wait(timeout=300) == 0, process.stderr.read().decode()
        process.stderr.close()
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    try:
        assert sum(written) > 0  # the writers did write meanwhile
        assert documents(read_lines(output)) == expected  # exactly the documents of the snapshot
    finally:
        web.delete(f"{server}/{index}", timeout=60)


@pytest.mark.parametrize("kind", ["records", "plain"])
def test_import_killed_at_random_moments_resumes_without_loss_or_duplicate(
    server: str, tmp_path: Path, kind: str
) -> None:
    n = 40_000
    if kind == "records":
        lines = [b'{"_index":"x","_id":"%d","_source":{"n":%d}}' % (i, i) for i in range(n)]
    else:  # no _id: the import derives one per line, so a chunk sent again cannot duplicate
        lines = [b'{"n":%d}' % i for i in range(n)]
    source = tmp_path / f"{kind}.ndjson"
    source.write_bytes(b"\n".join(lines) + b"\n")
    index = f"transfer-resume-{kind}"
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    args = ["import", str(source), index, "--url", server, "--chunk", "500", "--workers", "3"]
    state_file = Path(str(source) + ".import-state.json")

    def state() -> dict | None:
        try:
            return orjson.loads(state_file.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return None

    try:
        process = _start(*args)
        for _ in range(3):
            target = rng.randrange(1, n // 500)
            if not _kill_when(
                process, lambda s, t=target: s["done_below"] + len(s["acknowledged"]) >= t, state
            ):
                break
            process = _start(*args, "--resume")
        assert process.wait(timeout=300) == 0, (seed, process.stderr.read().decode())
        summary = process.stderr.read().decode()
        process.stderr.close()
        assert f"{n:,} items imported, 0 failed" in summary, (seed, summary)
        assert not state_file.exists()
        exported = tmp_path / "back.ndjson"
        cli("export", index, str(exported), "--url", server)
        values = sorted(orjson.loads(line)["_source"]["n"] for line in read_lines(exported))
        assert values == list(range(n)), f"seed {seed}"  # every line once: none lost, none twice
    finally:
        web.delete(f"{server}/{index}", timeout=60)


def test_interrupted_export_says_how_to_resume_and_a_new_run_closes_the_old_pit(
    server: str, loaded: str, dataset, tmp_path: Path
) -> None:
    _, _, expected = dataset
    before = open_contexts(server)
    output = tmp_path / "interrupted.ndjson"
    process = _start("export", loaded, str(output), "--url", server, "--slices", "2", interruptible=True)
    # Early in the export: half of it left to do, however fast the rest goes.
    assert _interrupt_when(process, lambda: 0 < sum((_state(output) or {"written": [0]})["written"]) < N // 2)
    stderr = process.stderr.read().decode()
    process.stderr.close()
    assert process.returncode == 130
    assert f"leafsearch export {loaded} {output} --resume" in stderr and "Traceback" not in stderr
    assert _state(output) is not None
    assert not list(tmp_path.glob("*.tmp"))
    assert open_contexts(server) == before + 1  # kept for the resume...
    cli("export", loaded, str(output), "--url", server)  # ... until a new export to the file
    assert open_contexts(server) == before
    assert documents(read_lines(output)) == expected


def _interrupt_when(process: subprocess.Popen, ready: Callable[[], bool]) -> bool:
    """Ctrl-C once `ready`: the process is stopped first, so that on a busy machine it cannot
    finish between the look and the signal (continued, it takes the SIGINT before it goes on)."""
    deadline = time.monotonic() + 120
    while process.poll() is None:
        if ready():
            process.send_signal(signal.SIGSTOP)
            process.send_signal(signal.SIGINT)
            process.send_signal(signal.SIGCONT)
            process.wait(timeout=60)
            return True
        assert time.monotonic() < deadline
        time.sleep(0.002)
    return False


def test_export_piped_into_head_closes_its_pit(server: str, loaded: str) -> None:
    before = open_contexts(server)
    command = f"{sys.executable} -m leafsearch export {loaded} --url {server} | head -n 3"
    done = subprocess.run(command, shell=True, cwd=REPO, env=server_env(), capture_output=True, timeout=300)
    assert len(done.stdout.splitlines()) == 3
    assert b"Traceback" not in done.stderr and b"Exception" not in done.stderr
    assert open_contexts(server) == before


def test_bad_input_is_a_message_and_status_1(server: str, tmp_path: Path) -> None:
    not_json = tmp_path / "notes.ndjson"
    not_json.write_text("these are notes\n")
    corrupt = tmp_path / "corrupt.ndjson.gz"
    corrupt.write_bytes(b"not gzip at all")
    truncated = tmp_path / "truncated.ndjson.zst"
    lines = b"".join(b'{"n": %d}\n' % i for i in range(10_000))
    truncated.write_bytes(zstandard.ZstdCompressor().compress(lines)[:-40])
    cases = {
        tmp_path / "missing.ndjson": b"no such file",
        tmp_path: b"Is a directory",
        not_json: b"line 1 is not JSON",
        corrupt: b"cannot read",
        truncated: b"cannot read",
    }
    for path, message in cases.items():
        done = cli("import", str(path), "transfer-bad", "--url", server, check=False)
        assert done.returncode == 1, path
        assert message in done.stderr and b"Traceback" not in done.stderr, done.stderr
        assert b"--resume" not in done.stderr  # nothing was sent: nothing to resume
    assert web.head(f"{server}/transfer-bad", timeout=60).status_code == 404  # nothing created
    assert not list(tmp_path.glob("*.import-state.json*"))
    missing = cli("import", str(tmp_path / "gone.ndjson"), "x", "--url", server, "--resume", check=False)
    assert (
        missing.returncode == 1 and b"no such file" in missing.stderr and b"Traceback" not in missing.stderr
    )
    resume = cli(
        "export", "anything", str(tmp_path / "none.ndjson"), "--url", server, "--resume", check=False
    )
    assert resume.returncode == 1 and b"nothing to resume" in resume.stderr


def test_export_writes_the_definition_that_import_applies(
    server: str, loaded: str, dataset, tmp_path: Path
) -> None:
    _, _, expected = dataset
    output = tmp_path / "defined.ndjson"
    done = cli(
        "export", loaded, str(output), "--url", server, "--query", '{"ids": {"values": ["0000000007"]}}'
    )
    assert b"exported 1 document of" in done.stderr
    definition = orjson.loads(Path(str(output) + ".index.json").read_bytes())
    assert definition["mappings"] == MAPPING
    assert "uuid" not in definition["settings"]["index"]
    try:
        cli("import", str(output), "transfer-defined", "--url", server)
        mapping = web.get(f"{server}/transfer-defined/_mapping", timeout=60).json()
        assert mapping["transfer-defined"]["mappings"] == MAPPING
        cli("import", str(output), "transfer-undefined", "--url", server, "--no-mapping")
        dynamic = web.get(f"{server}/transfer-undefined/_mapping", timeout=60).json()
        assert dynamic["transfer-undefined"]["mappings"]["properties"]["service"]["type"] == "text"
        got = web.get(f"{server}/transfer-defined/_doc/0000000007", timeout=60).json()
        assert orjson.dumps(got["_source"], option=orjson.OPT_SORT_KEYS) == expected["0000000007"]
    finally:
        web.delete(f"{server}/transfer-defined,transfer-undefined", timeout=60)
