"""A worker connection's messages read into one buffer (search/workers/wire.py): what
`Connection.send` wrote arrives whole and equal, whatever its size, nothing after it is read with
it, and a closed connection ends the reader."""

from __future__ import annotations

import multiprocessing
import threading

import numpy as np
import pytest

from leafsearch.search.workers.wire import receive


def test_messages_of_every_size_arrive_as_sent_and_what_follows_them_is_left_to_read() -> None:
    left, right = multiprocessing.Pipe()
    messages = [
        ("stats", 1),
        ("job", 2, [], b"x" * 70_000),  # past the pipe's buffer: read in several pieces
        ("job", 3, [], np.arange(2_000_000)),  # 16 MB
    ]

    def send() -> None:
        for message in messages:
            left.send(message)
            left.send_bytes(b"after")  # a reply's buffer, read by `recv_bytes`

    sender = threading.Thread(target=send)
    sender.start()
    try:
        for message in messages:
            got = receive(right)
            assert got[:3] == message[:3]
            if len(message) > 3:
                assert type(got[3]) is type(message[3])
                assert np.array_equal(np.asarray(got[3]), np.asarray(message[3]))
            assert right.recv_bytes() == b"after"
    finally:
        sender.join()
        left.close()
        right.close()


def test_a_connection_closed_by_the_other_end_ends_the_reader() -> None:
    left, right = multiprocessing.Pipe()
    left.send(("stats", 1))
    left.close()
    assert receive(right) == ("stats", 1)
    with pytest.raises(EOFError):
        receive(right)
    right.close()
    with pytest.raises(OSError):  # as `Connection.recv` on a closed handle: the readers stop
        receive(right)
