"""`leafsearch serve`'s uvicorn server, which stops as soon as it is told to.

uvicorn looks at its exit flag once per tick of its main loop, 0.1 s apart, and its shutdown then
sleeps 0.1 s after asking the open connections to close, whether any is still answering or not:
together about 150 ms of nothing on average between SIGTERM and the node's close (`serve` then
exits), at every stop of every server (a test suite stops some hundreds). Here a stop signal
wakes the main loop at once, and the shutdown goes straight to the lifespan's end when no
connection is left once the idle ones have closed; a connection still receiving or answering a
request makes it uvicorn's own graceful shutdown, waits included (`timeout_graceful_shutdown`).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable
from types import FrameType

import uvicorn

#: Seconds between two ticks of the main loop (uvicorn's: the `Date` header, the exit flag).
TICK_SECONDS = 0.1


class PromptServer(uvicorn.Server):
    """`uvicorn.Server`, woken by a stop signal and without a wait when nothing is left to finish."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._wake: Callable[[], None] | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._wake is not None:
            self._wake()

    async def main_loop(self) -> None:
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()
        self._wake = lambda: loop.call_soon_threadsafe(woken.set)
        counter = 0
        while not await self.on_tick(counter):
            counter = (counter + 1) % 864_000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), TICK_SECONDS)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()  # no new connection
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # an idle one closes now, one answering once it has answered
        await asyncio.sleep(0)  # (the closed ones' `connection_lost`)
        if self.server_state.connections or self.server_state.tasks:
            await super().shutdown(sockets)  # (closing again what is closed is nothing)
            return
        for server in self.servers:
            await server.wait_closed()
        if not self.force_exit:
            await self.lifespan.shutdown()
