"""A search worker's parked connections (search/workers/parking.py) over a socket pair: the walk's
continuation is consumed and served, anything else is left unread and handed back, an idle one
goes back as idle, and the bound on parked connections holds. (Through HTTP: test_parked_walks.py.)"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from concurrency import wait_for

from leafsearch.request.search_request import parse_search_request
from leafsearch.search.execution import Park, PitTask, ScrollAhead, ScrollTask
from leafsearch.search.socket_sink import SCROLL_SLOTS, ParkOffer, Sink, Written, security_stamp, send_all
from leafsearch.search.workers import parking as parking_module
from leafsearch.search.workers.parking import Parking, WhenReady


def _request(after: Any, size: int = 2) -> bytes:
    body = orjson.dumps({"size": size, "pit": {"id": "p", "keep_alive": "1m"}, "search_after": after})
    head = b"POST /_search HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def _with_body(body: bytes) -> bytes:
    head = b"POST /_search HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def _scroll(scroll_id: str) -> bytes:
    body = orjson.dumps({"scroll": "1m", "scroll_id": scroll_id})
    head = b"POST /_search/scroll HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


class Rig:
    """A Parking with a fake page writer, and the client's end of each parked socket."""

    def __init__(
        self,
        tmp_path: Path,
        limit: int = 8,
        idle: float = 60.0,
        follow: float | None = None,
        when_ready: WhenReady | None = None,
        notes_delay: float = 0.0,
    ) -> None:
        """`follow`: how long the thread that wrote a scroll's batch looks for the next request
        (`Parking.follow_seconds`); given, each request the selector thread hands over is
        served by a thread of its own, counted in `started`. `notes_delay`: how long notes are
        held before the selector thread tells them (`Parking`)."""
        self.messages: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self.security = [0] * (2 + SCROLL_SLOTS)  # the shared generations
        self.users = str(tmp_path / "users")
        self.idle = idle
        self.started = 0  # pages handed to a writer thread
        self.threads: list[threading.Thread] = []
        start = self._start if follow is None else self._thread
        kept = {} if follow is None else {"follow_seconds": follow}
        self.parking = Parking(
            self._execute,
            start,
            self.messages.put,
            self.security,
            limit,
            when_ready=when_ready,
            notes_delay=notes_delay,
            **kept,
        )
        self.pairs: list[tuple[socket.socket, socket.socket]] = []
        self.writers: list[str] = []  # the thread that wrote each page

    def _start(self, work: Any) -> None:
        self.started += 1
        work()

    def _thread(self, work: Any) -> None:
        self.started += 1
        thread = threading.Thread(target=work)
        self.threads.append(thread)
        thread.start()

    def _execute(self, task: PitTask | ScrollTask, park: Park, confirm: Any, phases: list) -> Any:
        assert task.sink is not None
        if isinstance(task, ScrollTask):  # as execution.run: confirmed, written, parked again
            cursor = [task.cursor[0] + 1]
            answer = confirm((cursor, 10, 1, []))
            if not answer:
                return Written(0, False, 1), cursor, 10, []
            os.write(task.sink.fd, b"batch %s" % task.public_id.encode())
            kept = park(dataclasses.replace(task, cursor=cursor), answer) if answer.ends else None
            return Written(10, True, 1, parked=kept), cursor, 10, []
        self.writers.append(threading.current_thread().name)
        # (waits for room, as a page's write)
        send_all(task.sink.fd, [b"page after %s" % orjson.dumps(task.request.search_after)], None)
        written = Written(10, True, 1)
        return dataclasses.replace(written, parked=park(task, [task.request.search_after[0] + 1]))

    def park(self, park_id: int, after: int = 1) -> tuple[socket.socket, int | None]:
        client, server = socket.socketpair()
        server.setblocking(False)
        self.pairs.append((client, server))
        offer = ParkOffer(
            park_id, _request([after - 1]), self.idle, security_stamp(self.security, self.users), self.users
        )
        offer = dataclasses.replace(offer, keep_alive=60.0, ctx_id=7)
        request = parse_search_request({"size": 2, "sort": [{"n": "asc"}]}, {})
        task = PitTask([], request, 0.0, True, 7, "p", None, Sink(server.fileno(), (b"", b""), park=offer))
        return client, self.parking.park(task, [after])

    def park_scroll(self, park_id: int) -> tuple[socket.socket, int | None]:
        """A scroll whose batch `s1` was written, its record naming the batches `s2` and `s3`."""
        client, server = socket.socketpair()
        server.setblocking(False)
        self.pairs.append((client, server))
        offer = ParkOffer(
            park_id, _scroll("s0"), self.idle, security_stamp(self.security, self.users), self.users
        )
        offer = dataclasses.replace(offer, keep_alive=60.0, ctx_id=7)
        request = parse_search_request({"size": 2, "sort": ["_doc"]}, {})
        sink = Sink(server.fileno(), (b"", b""), confirm=True, park=offer)
        task = ScrollTask([], request, 0.0, True, 7, "s1", [1], 10, False, True, None, sink)
        return client, self.parking.park(task, ScrollAhead(1, (([2], "s2"), ([3], "s3"))))

    def message(self) -> tuple:
        return self.messages.get(timeout=30)

    def close(self) -> None:
        self.parking.close()
        for thread in self.threads:
            thread.join()
        for client, server in self.pairs:
            client.close()
            server.close()


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    made = Rig(tmp_path)
    yield made
    made.close()


def test_the_walks_continuation_is_consumed_and_served_and_the_connection_stays(rig: Rig) -> None:
    client, parked = rig.park(1)
    assert parked == os.getpid()
    client.sendall(_request([1]))
    kind, park_id, note = rig.message()
    assert (kind, park_id, note["request_bytes"]) == ("served", 1, len(_request([1]).split(b"\r\n\r\n")[1]))
    assert client.recv(100) == b"page after [1]"
    client.sendall(_request([2]))  # the next page's cursor: served again
    assert rig.message()[0] == "served"
    assert client.recv(100) == b"page after [2]"
    assert rig.parking.count() == 1


@pytest.mark.parametrize(
    "sent",
    [
        _request([5]),  # not the cursor the page ended at
        _request([1], size=3),  # another body
        _request([1]).replace(b"host: h", b"host: x"),  # another header
        _request([1]) + _request([2]),  # pipelined
    ],
)
def test_anything_else_is_left_unread_and_handed_back(rig: Rig, sent: bytes) -> None:
    client, _ = rig.park(1)
    client.sendall(sent)
    assert rig.message() == ("handback", 1, "other")
    _, server = rig.pairs[0]
    assert server.recv(1 << 16, socket.MSG_PEEK) == sent  # the server process reads it all
    assert rig.parking.count() == 0


def test_a_security_change_hands_back_an_exact_continuation(rig: Rig) -> None:
    client, _ = rig.park(1)
    rig.security[0] += 1
    client.sendall(_request([1]))
    assert rig.message() == ("handback", 1, "other")


def test_a_closed_client_and_a_forgotten_context_hand_back(rig: Rig) -> None:
    first, _ = rig.park(1)
    rig.park(2)
    first.close()
    assert rig.message() == ("handback", 1, "other")
    rig.parking.forget(7)
    assert rig.message() == ("handback", 2, "other")
    assert rig.parking.count() == 0


def test_an_idle_parked_connection_goes_back_as_idle(tmp_path: Path) -> None:
    rig = Rig(tmp_path, idle=0.2)
    try:
        rig.park(1)
        assert rig.message() == ("handback", 1, "idle")
        assert rig.parking.count() == 0
    finally:
        rig.close()


def test_no_more_than_the_limit_are_parked_and_their_descriptors_go(tmp_path: Path) -> None:
    rig = Rig(tmp_path, limit=2)
    fds = len(os.listdir("/proc/self/fd"))
    try:
        assert rig.park(1)[1] is not None
        assert rig.park(2)[1] is not None
        assert rig.park(3)[1] is None
        assert rig.parking.count() == 2
        rig.parking.drop(1)
        rig.parking.drop(2)
    finally:
        rig.close()
    assert len(os.listdir("/proc/self/fd")) <= fds


def test_a_scroll_is_served_the_batches_its_record_names_then_handed_back_unread(rig: Rig) -> None:
    client, parked = rig.park_scroll(1)
    assert parked == os.getpid()
    client.sendall(_scroll("s1"))
    assert client.recv(100) == b"batch s2"
    client.sendall(_scroll("s2"))
    assert client.recv(100) == b"batch s3"
    assert _told(rig) == [(2, "s2", [2], 1), (3, "s3", [3], 1)]  # before the hand-back:
    assert rig.message() == ("handback", 1, "other")  # the next batch needs a new record
    assert rig.parking.count() == 0


def _told(rig: Rig, batches: int = 2) -> list[tuple]:
    """The scroll's batches the server process is told of (together or apart, as the requests
    came while the thread that wrote the last batch looked for them)."""
    told: list[tuple] = []
    while len(told) < batches:
        kind, _, note = rig.message()
        assert kind == "served" and note["requests"] == len(note["scroll"])
        told += note["scroll"]
    return told


@pytest.mark.parametrize("change", ["another id", "the previous id", "moved elsewhere", "another keep-alive"])
def test_what_is_not_the_scrolls_continuation_is_left_unread(rig: Rig, change: str) -> None:
    client, _ = rig.park_scroll(1)
    sent = {
        "another id": _scroll("s2"),
        "the previous id": _scroll("s0"),
        "moved elsewhere": _scroll("s1"),
        "another keep-alive": _scroll("s1").replace(b'"1m"', b'"2m"'),
    }[change]
    if change == "moved elsewhere":
        rig.security[2 + 7] += 1  # the server process served a batch of the scroll
    client.sendall(sent)
    assert rig.message() == ("handback", 1, "other")
    _, server = rig.pairs[0]
    assert server.recv(1 << 16, socket.MSG_PEEK) == sent


@pytest.fixture
def following(tmp_path: Path) -> Iterator[Rig]:
    """A rig whose scroll batches' threads look for the next request for a minute (the worker's
    look for 2 ms: a client's next request that comes later goes to the selector thread)."""
    made = Rig(tmp_path, follow=60.0, notes_delay=3600.0)
    yield made
    made.close()


def test_a_scrolls_next_request_is_served_by_the_thread_that_wrote_its_batch(following: Rig) -> None:
    client, _ = following.park_scroll(1)
    client.sendall(_scroll("s1"))
    assert client.recv(100) == b"batch s2"
    client.sendall(_scroll("s2"))
    assert client.recv(100) == b"batch s3"
    kind, _, note = following.message()  # both told at once, before the hand-back
    assert kind == "served" and note["scroll"] == [(2, "s2", [2], 1), (3, "s3", [3], 1)]
    assert note["requests"] == 2 and note["request_bytes"] == 2 * len(_scroll("s1").split(b"\r\n\r\n")[1])
    assert following.message() == ("handback", 1, "other")  # the next batch needs a new record
    assert following.started == 1  # the selector thread handed over the first request only
    assert following.parking.count() == 0


def test_a_next_request_already_there_is_served_by_the_thread_that_wrote_the_batch(tmp_path: Path) -> None:
    """The thread that wrote a batch looks at the socket first, without waiting: a request that
    came while the next batch was rendered is served at once, even with no time to follow."""
    rig = Rig(tmp_path, follow=0.0, notes_delay=3600.0)
    try:
        client, _ = rig.park_scroll(1)
        _, server = rig.pairs[0]
        execute = rig._execute
        rendering: list[bool] = []

        def rendered_meanwhile(task: Any, park: Park, confirm: Any, phases: list) -> Any:
            written = execute(task, park, confirm, phases)
            if not rendering:  # (the batch after s2's request: that request comes meanwhile)
                rendering.append(True)
                wait_for(lambda: parking_module._peek(server) == _scroll("s2"))
            return written

        rig.parking._execute = rendered_meanwhile
        client.sendall(_scroll("s1"))
        assert client.recv(100) == b"batch s2"
        client.sendall(_scroll("s2"))
        assert client.recv(100) == b"batch s3"
        assert _told(rig) == [(2, "s2", [2], 1), (3, "s3", [3], 1)]
        assert rig.message() == ("handback", 1, "other")
        assert rig.started == 1  # the selector thread handed over the first request only
    finally:
        rig.close()


def test_what_the_following_thread_finds_that_is_no_continuation_is_left_unread(following: Rig) -> None:
    client, _ = following.park_scroll(1)
    client.sendall(_scroll("s1"))
    assert client.recv(100) == b"batch s2"
    client.sendall(_scroll("s1"))  # the previous id: the general path replays the batch
    assert _told(following, 1) == [(2, "s2", [2], 1)]  # before the hand-back
    assert following.message() == ("handback", 1, "other")
    _, server = following.pairs[0]
    assert server.recv(1 << 16, socket.MSG_PEEK) == _scroll("s1")
    assert following.parking.count() == 0


def test_a_continuation_in_two_writes_goes_to_the_selector_thread_and_is_served(following: Rig) -> None:
    client, _ = following.park_scroll(1)
    client.sendall(_scroll("s1"))
    assert client.recv(100) == b"batch s2"
    head, body = _scroll("s2").split(b"\r\n\r\n")
    client.sendall(head + b"\r\n\r\n")  # the official client's head, its body after it
    assert _told(following, 1) == [(2, "s2", [2], 1)]  # told as the selector thread takes it
    client.sendall(body)
    assert client.recv(100) == b"batch s3"
    assert _told(following, 1) == [(3, "s3", [3], 1)]
    assert following.message() == ("handback", 1, "other")
    assert following.started == 2


def test_a_connection_the_server_closed_while_its_batch_was_written_is_dropped(following: Rig) -> None:
    client, _ = following.park_scroll(1)
    dropped = threading.Event()
    execute = following._execute

    def closing(task: Any, park: Park, confirm: Any, phases: list) -> Any:
        following.parking.drop(1)  # the server process closed it meanwhile
        wait_for(lambda: following.parking._dropped.get(1, False))
        dropped.set()
        return execute(task, park, confirm, phases)

    following.parking._execute = closing
    client.sendall(_scroll("s1"))
    assert following.message()[0] == "served"
    assert client.recv(100) == b"batch s2"
    wait_for(lambda: following.parking.count() == 0)
    assert dropped.is_set() and following.messages.empty()  # dropped: nothing handed back


def test_a_continuation_written_otherwise_than_the_last_request_is_compared_parsed(rig: Rig) -> None:
    """The next request is mostly the last one with the id it was answered (compared as bytes);
    the same fields written in another order or spacing are the continuation all the same."""
    client, _ = rig.park_scroll(1)
    body = b'{ "scroll_id" : "s1", "scroll" : "1m" }'
    head = b"POST /_search/scroll HTTP/1.1\r\nhost: h\r\ncontent-type: application/json\r\n"
    client.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
    assert client.recv(100) == b"batch s2"
    assert _told(rig, 1) == [(2, "s2", [2], 1)]


def test_batches_not_told_yet_are_told_when_asked(following: Rig) -> None:
    """A request of the scroll on another connection, or statistics, ask the worker first
    (`tell_all`): the batches it served are told at once, though their thread still looks for
    the next request."""
    client, _ = following.park_scroll(1)
    client.sendall(_scroll("s1"))
    assert client.recv(100) == b"batch s2"
    assert following.messages.empty() and following.parking.count() == 1  # followed, untold
    following.parking.tell_all()
    kind, park_id, note = following.message()
    assert (kind, park_id, note["scroll"]) == ("served", 1, [(2, "s2", [2], 1)])
    following.parking.tell_all()  # nothing more to tell
    client.sendall(_scroll("s2"))
    assert client.recv(100) == b"batch s3"
    assert _told(following, 1) == [(3, "s3", [3], 1)]
    assert following.message() == ("handback", 1, "other")


def test_a_walks_continuation_is_compared_as_bytes_in_the_frame_of_the_request_before(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the request that parked a PIT walk, with the cursor its page ended at and the
    Content-Length to match, passes the whole comparison, the walk's next requests are compared
    to it as bytes, not parsed; one written otherwise is compared parsed and served all the same,
    and the frame is taken again from a request written as the first."""
    compared: list[bytes] = []
    whole = Parking._same_request

    def comparing(parked: Any, peeked: bytes) -> Any:
        compared.append(peeked)
        return whole(parked, peeked)

    monkeypatch.setattr(Parking, "_same_request", staticmethod(comparing))
    client, _ = rig.park(1, after=9)
    assert compared == [_request([9])]  # the frame's check, when parked
    for after in (9, 10, 11):  # (the body one byte longer from [10] on)
        client.sendall(_request([after]))
        assert client.recv(100) == b"page after [%d]" % after
        assert rig.message()[0] == "served"
    assert compared == [_request([9])]
    spaced = _with_body(b'{"size":2,"pit":{"id":"p","keep_alive":"1m"},"search_after": [12]}')
    for after, sent in ((12, spaced), (13, _request([13])), (14, _request([14]))):
        client.sendall(sent)
        assert client.recv(100) == b"page after [%d]" % after
        assert rig.message()[0] == "served"
    # parsed: the spaced one, the next (no frame in the spaced one), the frame of that next one
    assert compared == [_request([9]), spaced, _request([13]), _request([14])]
    assert rig.parking.count() == 1


def _looks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """What the parked connections' looks find on their sockets, in order."""
    looked: list[bytes] = []
    continuation = Parking._continuation

    def looking(self: Parking, parked: Any, peeked: bytes) -> Any:
        looked.append(peeked)
        return continuation(self, parked, peeked)

    monkeypatch.setattr(Parking, "_continuation", looking)
    return looked


def test_the_start_of_a_walks_continuation_ending_otherwise_is_left_unread(
    rig: Rig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first bytes of the continuation it expects are waited for like any request's start;
    what completes them is compared, and anything but the continuation goes back unread."""
    looked = _looks(monkeypatch)
    client, _ = rig.park(1)
    request = _request([1])
    assert request.endswith(b"[1]}")
    client.sendall(request[:-3])
    wait_for(lambda: bool(looked))
    client.sendall(b"2]}")  # the cursor of another page
    assert rig.message() == ("handback", 1, "other")
    _, server = rig.pairs[0]
    assert server.recv(1 << 16, socket.MSG_PEEK) == request[:-3] + b"2]}"
    assert rig.parking.count() == 0


def test_a_ready_page_is_written_by_the_thread_that_read_its_request(tmp_path: Path) -> None:
    """A PIT page read ahead and ready goes out from the selector thread, no writer thread woken;
    the walk stays parked and goes on the same way."""
    asked: list[tuple[int, bytes]] = []

    def ready(task: PitTask, key: bytes, call: Callable[[int | None], None]) -> bool:
        asked.append((task.ctx_id, key))
        call(100)
        return True

    rig = Rig(tmp_path, when_ready=ready)
    try:
        client, _ = rig.park(1)
        for after in (1, 2):
            client.sendall(_request([after]))
            assert rig.message()[0] == "served"
            assert client.recv(100) == b"page after [%d]" % after
        assert asked == [(7, b"[1]"), (7, b"[2]")]  # the cursor each page starts from
        assert (rig.started, rig.writers) == (0, ["leafsearch-worker-parking"] * 2)
        assert rig.parking.count() == 1
    finally:
        rig.close()


def test_a_page_being_prepared_is_written_by_the_thread_that_prepares_it(tmp_path: Path) -> None:
    """The request came before its page was ready: the thread that prepares the page writes it as
    it ends, or a writer thread when the preparation failed."""
    calls: queue.SimpleQueue[Callable[[int | None], None]] = queue.SimpleQueue()

    def being_prepared(task: PitTask, key: bytes, call: Callable[[int | None], None]) -> bool:
        calls.put(call)
        return True

    rig = Rig(tmp_path, when_ready=being_prepared)
    try:
        client, _ = rig.park(1)
        client.sendall(_request([1]))
        prepared = threading.Thread(target=calls.get(timeout=30), args=(100,), name="preparing")
        prepared.start()
        prepared.join()
        assert rig.message()[0] == "served"
        assert client.recv(100) == b"page after [1]"
        client.sendall(_request([2]))
        calls.get(timeout=30)(None)  # its preparation failed: a writer renders it
        assert rig.message()[0] == "served"
        assert client.recv(100) == b"page after [2]"
        assert (rig.started, rig.writers) == (1, ["preparing", "MainThread"])
    finally:
        rig.close()


def test_a_page_not_ready_or_without_room_in_the_socket_goes_to_a_writer_thread(tmp_path: Path) -> None:
    """The selector thread never waits: not for a page whose preparation has not started, nor for
    a client that stopped reading (its socket's buffer full), whose page a writer thread writes
    as the client reads."""
    ready = {"now": False}

    def when_ready(task: PitTask, key: bytes, call: Callable[[int | None], None]) -> bool:
        if ready["now"]:
            call(100)
        return ready["now"]

    rig = Rig(tmp_path, when_ready=when_ready)
    try:
        client, _ = rig.park(1)
        client.sendall(_request([1]))  # not being prepared
        assert rig.message()[0] == "served"
        assert client.recv(100) == b"page after [1]"
        assert rig.started == 1
        ready["now"] = True
        _, server = rig.pairs[0]
        filler = 0
        with contextlib.suppress(BlockingIOError):
            while True:  # the client reads nothing meanwhile
                filler += server.send(b"x" * 65536)
        client.sendall(_request([2]))
        wait_for(lambda: rig.started == 2)  # (a writer: the rig's waits for room in this thread's)
        got = b""
        while len(got) < filler + len(b"page after [2]"):
            got += client.recv(1 << 20)
        assert got.endswith(b"page after [2]")
        assert rig.message()[0] == "served"
    finally:
        rig.close()


def test_a_walks_notes_go_as_one_and_before_its_connection_goes_back(tmp_path: Path) -> None:
    """The server process hears of a parked walk's pages once per notes' delay, their counts
    added up, and always before the connection is handed back (it would not count them after)."""
    rig = Rig(tmp_path, notes_delay=3600.0)
    try:
        client, _ = rig.park(1)
        for after in (1, 2, 3):
            client.sendall(_request([after]))
            assert client.recv(100) == b"page after [%d]" % after
        assert rig.messages.empty()  # held for the delay
        client.sendall(_request([9]))  # not the walk's continuation: handed back
        kind, park_id, note = rig.message()
        bodies = sum(len(_request([after]).split(b"\r\n\r\n")[1]) for after in (1, 2, 3))
        assert (kind, park_id, note["requests"], note["request_bytes"]) == ("served", 1, 3, bodies)
        assert rig.message() == ("handback", 1, "other")
    finally:
        rig.close()


def test_notes_held_go_when_their_delay_ends_when_asked_or_when_the_worker_closes(tmp_path: Path) -> None:
    rig = Rig(tmp_path, notes_delay=0.05)
    try:
        client, _ = rig.park(1)
        client.sendall(_request([1]))
        assert client.recv(100) == b"page after [1]"
        assert rig.message()[:2] == ("served", 1)  # the delay ended: no other page needed
    finally:
        rig.close()
    closing = Rig(tmp_path, notes_delay=3600.0)
    client, _ = closing.park(1)
    client.sendall(_request([1]))
    assert client.recv(100) == b"page after [1]"
    wait_for(lambda: bool(closing.parking._notes))  # (held just after the page's bytes went out)
    closing.parking.tell_all()  # as the worker does before it answers for its statistics
    assert closing.message()[:2] == ("served", 1)
    client.sendall(_request([2]))
    assert client.recv(100) == b"page after [2]"
    wait_for(lambda: bool(closing.parking._notes))  # (held just after the page's bytes went out)
    closing.close()
    assert closing.message()[:2] == ("served", 1)


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    server.setblocking(False)
    return client, server


def test_a_body_sent_apart_from_its_head_is_awaited_on_the_socket_and_its_mark_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The official clients send a request's head and body in two writes: the selector thread
    waits on the socket for the rest (a receive low-water mark of the request's size), never
    longer than its bound, and leaves the mark at 1 (the server process reads the socket again
    when it is handed back)."""
    request = _request([1])
    head, body = request[: request.index(b"\r\n\r\n") + 4], request[request.index(b"\r\n\r\n") + 4 :]
    client, server = _tcp_pair()
    try:
        client.sendall(head)
        wait_for(lambda: len(server.recv(1 << 16, socket.MSG_PEEK)) == len(head))
        assert not parking_module._body_awaited(server, head)  # no body within the bound
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        monkeypatch.setattr(parking_module, "_BODY_WAIT", 60.0)  # (returns as the body comes)
        sender = threading.Thread(target=client.sendall, args=(body,))
        sender.start()
        assert parking_module._body_awaited(server, head)
        sender.join()
        assert server.recv(1 << 16, socket.MSG_PEEK) == request
        assert server.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
        assert not parking_module._body_awaited(server, head[:-2])  # the head itself not whole
    finally:
        client.close()
        server.close()


def test_only_a_requests_first_look_waits_for_its_body(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that sends a head and holds its body back holds the selector thread for one wait
    at most; the request is served once its body comes."""
    awaited: list[bytes] = []
    monkeypatch.setattr(parking_module, "_body_awaited", lambda _, peeked: awaited.append(peeked) and False)
    looked = _looks(monkeypatch)
    client, _ = rig.park(1)
    request = _request([1])
    cut = request.index(b"\r\n\r\n") + 4
    client.sendall(request[:cut])
    wait_for(lambda: len(looked) >= 3)
    assert awaited == [request[:cut]]
    client.sendall(request[cut:])
    assert rig.message()[0] == "served"
    assert client.recv(100) == b"page after [1]"
