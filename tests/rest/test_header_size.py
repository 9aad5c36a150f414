"""`http.max_header_size`: a request whose headers are larger is answered as Elasticsearch's netty
transport answers it (400 `too_long_http_header_exception`), its connection closed, and the node
keeps serving; headers up to the limit are taken."""

from __future__ import annotations

import contextlib
import socket
import threading
from pathlib import Path

import orjson
from conftest import running_server

from tests import web


def exchange(url: str, headers: bytes) -> tuple[int, dict, bytes]:
    """Send `GET /` with `headers` (raw lines) on a new connection, the sending on a thread (the
    server may close before it has read everything); the status, headers and body answered."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        request = b"GET / HTTP/1.1\r\nHost: localhost\r\n" + headers + b"\r\n"

        def send() -> None:
            with contextlib.suppress(OSError):  # closed by the server once it refused the head
                sock.sendall(request)

        sender = threading.Thread(target=send)
        sender.start()
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += sock.recv(65536)
        head, _, body = answer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        fields = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines[1:])}
        while len(body) < int(fields["content-length"]):
            body += sock.recv(65536)
        sender.join()
    return int(lines[0].split(" ")[1]), fields, body


def header_of(size: int) -> bytes:
    """One header line whose name, `: ` and value are `size` bytes, as netty counts them."""
    return b"X-Big: " + b"a" * (size - len(b"X-Big: ")) + b"\r\n"


HOST_LINE = len(b"Host: localhost")


def test_headers_past_the_limit_are_refused_as_elasticsearch_does(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", "--search-workers", "0") as (url, _):
        status, _, _ = exchange(url, header_of(16 * 1024 - HOST_LINE))
        assert status == 200
        for size in (16 * 1024 - HOST_LINE + 1, 64 * 1024, 1 << 20, 8 << 20):
            status, fields, body = exchange(url, header_of(size))
            reason = "HTTP header is larger than 16384 bytes."
            assert (status, orjson.loads(body)) == (
                400,
                {
                    "error": {
                        "root_cause": [{"type": "too_long_http_header_exception", "reason": reason}],
                        "type": "too_long_http_header_exception",
                        "reason": reason,
                    },
                    "status": 400,
                },
            )
            assert fields["connection"] == "close"
            assert fields["x-elastic-product"] == "Elasticsearch"
        # many headers count together
        many = b"".join(b"X-H%03d: %s\r\n" % (i, b"b" * 100) for i in range(200))
        assert exchange(url, many)[0] == 400
        assert web.get(f"{url}/").status_code == 200


def test_the_limit_is_a_node_setting(tmp_path: Path) -> None:
    with running_server(tmp_path / "data", "--search-workers", "0", "-E", "http.max_header_size=1kb") as (
        url,
        _,
    ):
        assert exchange(url, header_of(1024 - HOST_LINE))[0] == 200
        status, _, body = exchange(url, header_of(1024 - HOST_LINE + 1))
        assert status == 400
        assert orjson.loads(body)["error"]["reason"] == "HTTP header is larger than 1024 bytes."
