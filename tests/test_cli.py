"""The command line: start-up, the data folder lock, clean shutdown, the body size limit."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path

from conftest import REPO, free_port, running_server, serve_command, server_env, start_server

from tests import web


def test_serve_announces_its_address_and_answers(tmp_path: Path) -> None:
    """Start-up time is measured by bench (W0: restart after kill -9 until `_count` answers)."""
    port = free_port()
    process = start_server(tmp_path / "data", port, fresh_interpreter=True)
    try:
        line = process.stdout.readline()
        assert f"leafsearch listening on http://127.0.0.1:{port}" in line
        answer = web.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert answer.json()["tagline"] == "You Know, for Search"
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=20)
        process.stdout.close()


def test_second_node_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with running_server(data, fresh_interpreter=True):
        second = subprocess.run(
            serve_command(data, free_port()),
            cwd=REPO,
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert second.returncode != 0
    assert "in use by another leafsearch node" in second.stderr
    assert "Traceback" not in second.stderr


def test_sigterm_and_sigint_shut_down_cleanly_and_release_the_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for number, sig in enumerate((signal.SIGTERM, signal.SIGINT)):
        with running_server(data, fresh_interpreter=True) as (url, process):
            assert web.put(f"{url}/kept-{number}", timeout=10).status_code == 200
            process.send_signal(sig)
            assert process.wait(timeout=20) == 0
    # the lock was released and the index survived both restarts
    with running_server(data, fresh_interpreter=True) as (url, _):
        assert web.head(f"{url}/kept-0,kept-1", timeout=10).status_code == 200


def test_requests_in_flight_at_sigterm_are_answered_then_idle_connections_close(tmp_path: Path) -> None:
    """A stop does not wait out fixed intervals (rest/stopping.py), and still answers what it
    was asked: four `_bulk` requests whose bodies are still coming when SIGTERM arrives (each
    already read by the app: uvicorn answered its `Expect: 100-continue`) get their 200, with the
    writes on disk after a restart, beside an idle keep-alive connection."""
    data = tmp_path / "data"
    body = b"".join(b'{"index":{"_index":"late","_id":"%d"}}\n{"n":%d}\n' % (i, i) for i in range(4))
    head = (
        b"POST /_bulk?refresh=true HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n"
    )
    with running_server(data, fresh_interpreter=True) as (url, process):
        host, port = url.removeprefix("http://").split(":")
        with web.Client(base_url=url, timeout=10) as idle:
            assert idle.get("/").status_code == 200  # (kept alive, idle)
            late = [socket.create_connection((host, int(port)), timeout=60) for _ in range(4)]
            for number, sock in enumerate(late):
                part = body.splitlines(keepends=True)[2 * number : 2 * number + 2]
                sock.sendall(head % len(b"".join(part)))
                assert sock.recv(1024).startswith(b"HTTP/1.1 100 Continue")
            process.send_signal(signal.SIGTERM)
            answers = []
            for number, sock in enumerate(late):
                with sock:
                    sock.sendall(b"".join(body.splitlines(keepends=True)[2 * number : 2 * number + 2]))
                    answers.append(_read_until_closed(sock))
            assert process.wait(timeout=20) == 0
    assert all(answer.startswith(b"HTTP/1.1 200 ") and b'"errors":false' in answer for answer in answers)
    with running_server(data, fresh_interpreter=True) as (url, _):
        assert web.get(f"{url}/late/_count", timeout=10).json()["count"] == 4


def _read_until_closed(sock: socket.socket) -> bytes:
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    return answer


def test_busy_port_is_a_clear_error(tmp_path: Path) -> None:
    with running_server(tmp_path / "one", fresh_interpreter=True) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        other = subprocess.run(
            serve_command(tmp_path / "two", port),
            cwd=REPO,
            env=server_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert other.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in other.stderr


def test_max_content_length_answers_413(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", "--max-content-length", "1kb", fresh_interpreter=True) as (url, _):
        big = web.post(
            f"{url}/_search", content=b" " * 2048, headers={"content-type": "application/json"}, timeout=10
        )
        assert big.status_code == 413
        assert big.headers["x-elastic-product"] == "Elasticsearch"
        error = big.json()["error"]
        assert error["type"] == "content_too_long_exception"
        assert error["reason"] == "entity content is too long [2048] for the configured buffer limit [1024]"
        # the server keeps serving after refusing
        assert web.get(f"{url}/", timeout=10).status_code == 200


def test_bad_max_content_length_is_a_usage_error(tmp_path: Path) -> None:
    result = subprocess.run(
        serve_command(tmp_path / "d", free_port(), "--max-content-length", "lots"),
        cwd=REPO,
        env=server_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--max-content-length" in result.stderr
