"""One keep-alive HTTP/1.1 connection written and read by hand, for tests that need its exact
bytes: a request's headers as given, pipelined requests, the same connection across pages, a
response's exact head, a client that stops reading or goes away mid-body."""

from __future__ import annotations

import re
import socket
from typing import Any

import orjson


class Conn:
    """One keep-alive connection written and read by hand (exact request bytes, pipelining)."""

    def __init__(self, url: str, receive_buffer: int | None = None) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.sock = socket.socket()
        if receive_buffer is not None:  # before connecting: the window is agreed then
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.connect((host, int(port)))
        self.sock.settimeout(60)
        self.pending = b""

    @staticmethod
    def request(
        path: str, body: Any = None, headers: dict[str, str] | None = None, method: str = "POST"
    ) -> bytes:
        data = b"" if body is None else orjson.dumps(body)
        head = f"{method} {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
        head += "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        return head.encode() + b"content-length: %d\r\n\r\n" % len(data) + data

    def send(self, *requests: bytes) -> None:
        self.sock.sendall(b"".join(requests))

    def ask(self, *requests: bytes) -> list[tuple[int, bytes]]:
        self.send(*requests)
        return [self.response() for _ in requests]

    def response(self) -> tuple[int, bytes]:
        """The next response's status and body."""
        head, body = self.response_with_head()
        return int(head.split(b" ", 2)[1]), body

    def response_with_head(self) -> tuple[bytes, bytes]:
        """The next response: its head (blank line included) and its body (by its Content-Length)."""
        while b"\r\n\r\n" not in self.pending:
            self.read_more()
        head, _, self.pending = self.pending.partition(b"\r\n\r\n")
        length = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))  # type: ignore[union-attr]
        while len(self.pending) < length:
            self.read_more()
        body, self.pending = self.pending[:length], self.pending[length:]
        return head + b"\r\n\r\n", body

    def read_more(self) -> None:
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("the server closed the connection")
        self.pending += data

    def close(self) -> None:
        self.sock.close()
