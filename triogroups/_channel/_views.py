"""`Channel.views`: an async iterator over installed views."""

from __future__ import annotations

from collections import deque

import trio

from triogroups.view import View

__all__ = ["ViewIterator"]

_VIEWS_KEPT = 64  # views a slow consumer may fall behind before the oldest go


class ViewIterator:
    """The views installed from now on, the current one first; see `Channel.views`."""

    def __init__(self, current: View | None) -> None:
        self._pending: deque[View] = deque(maxlen=_VIEWS_KEPT)
        if current is not None:
            self._pending.append(current)
        self._closed = False
        self._wake = trio.Event()
        self.skipped = 0

    def _push(self, view: View) -> None:
        if len(self._pending) == _VIEWS_KEPT:
            self.skipped += 1
        self._pending.append(view)
        self._wake.set()

    def _close(self) -> None:
        self._closed = True
        self._wake.set()

    def __aiter__(self) -> ViewIterator:
        return self

    async def __anext__(self) -> View:
        while not self._pending:
            if self._closed:
                raise StopAsyncIteration
            self._wake = trio.Event()
            await self._wake.wait()
        return self._pending.popleft()
