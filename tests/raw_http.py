"""One keep-alive HTTP/1.1 connection written and read by hand, for tests that need its exact
bytes: a request's headers as given, pipelined requests, the same connection across pages."""

from __future__ import annotations

import re
import socket
from typing import Any

import orjson


class Conn:
    """One keep-alive connection written and read by hand (exact request bytes, pipelining)."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.pending = b""

    @staticmethod
    def request(path: str, body: Any, headers: dict[str, str] | None = None, method: str = "POST") -> bytes:
        data = orjson.dumps(body)
        head = f"{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        return head.encode() + b"content-length: %d\r\n\r\n" % len(data) + data

    def ask(self, *requests: bytes) -> list[tuple[int, bytes]]:
        self.sock.sendall(b"".join(requests))
        return [self.response() for _ in requests]

    def response(self) -> tuple[int, bytes]:
        while b"\r\n\r\n" not in self.pending:
            self._more()
        head, self.pending = self.pending.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
        while len(self.pending) < length:
            self._more()
        body, self.pending = self.pending[:length], self.pending[length:]
        return status, body

    def _more(self) -> None:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("closed")
        self.pending += data

    def close(self) -> None:
        self.sock.close()
