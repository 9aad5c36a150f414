"""A message of a worker's connection read into one buffer.

`Connection.recv` reads a large message in pieces, and each `os.read` first allocates a bytes
object of the whole remaining size (above the mmap threshold, pages mapped and unmapped again),
then the piece is copied into a `BytesIO`: 18 ms of CPU for a message of 15 MB, against 10 ms read
into one buffer allocated once (a buffer of 25,000 bench documents sent to be written as a
segment is 11 MB; bench/RESULTS.md, "Bulk with 4 clients (session 17)"). The wire format is
`Connection.send`'s: a 4-byte big-endian size (-1, then an 8-byte size, beyond 2 GiB), then the
pickle. Nothing past the message is read, so what follows it (a handle sent by SCM_RIGHTS, the
buffers of a reply) is read as before.
"""

from __future__ import annotations

import os
import pickle
import struct
from multiprocessing.connection import Connection
from typing import Any


def receive(conn: Connection) -> Any:
    """The next message sent by `Connection.send` (EOFError when the other end closed)."""
    fd = conn.fileno()
    (size,) = struct.unpack("!i", _read(fd, 4))
    if size == -1:
        (size,) = struct.unpack("!Q", _read(fd, 8))
    return pickle.loads(_read(fd, size))


def _read(fd: int, size: int) -> bytearray:
    data = bytearray(size)
    view = memoryview(data)
    done = 0
    while done < size:
        count = os.readv(fd, [view[done:]])
        if count == 0:
            raise EOFError
        done += count
    return data
