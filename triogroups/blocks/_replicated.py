"""A replicated dictionary whose replicas converge: `open_replicated_dict`.

In the manner of JGroups' ReplicatedHashMap over a SEQUENCER stack: every write is a
group RPC that every member applies when it is delivered, and on a stack with SEQUENCER
every member delivers the group's writes in one total order, so members that stay apply
the same writes in the same order and hold the same dictionary (with per-sender order
only, two members writing one key at once would leave the replicas different for
ever). A joiner gets the dictionary by the channel's state transfer. Reads are local.
This module never reads the channel's messages: writes travel as RPC requests, which
leaves the channel's receive side to the application.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from triogroups._channel import Channel, open_channel
from triogroups._errors import ChannelClosed
from triogroups.config import StackConfig

__all__ = ["ReplicatedDict", "open_replicated_dict"]

_APPLY = "triogroups.dict.apply"
_KEY_TYPES = (str, bytes, int)


class _Waiter:
    """A write of this member's, waiting until it is applied here."""

    __slots__ = ("applied", "done", "result")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.applied = False
        self.result: Any = None


class ReplicatedDict(Mapping[Any, Any]):
    """A dictionary every member of a group holds a replica of (made by
    `open_replicated_dict`).

    Reads (``store[key]``, ``get``, ``in``, ``len``, iteration) are local and see the
    writes applied here so far. Writes (`put`, `delete`, `clear`) go to every member
    and return once applied on this one, so a task reads its own writes. Every member
    that stays applies every write of every member that stays, in one order: once the
    writes stop, the replicas are equal. Keys are str, bytes or int; values anything
    the channel encodes (msgpack).
    """

    def __init__(self) -> None:
        self._data: dict[Any, Any] = {}
        self._channel: Channel | None = None
        self._id = os.urandom(8)  # tells this replica's writes from the others'
        self._tokens = itertools.count(1)
        self._waiting: dict[int, _Waiter] = {}
        self._closed = False
        self._counters = {"writes": 0, "applied": 0, "states_set": 0}

    @property
    def channel(self) -> Channel:
        """The channel the dictionary runs on (its receive side is the application's)."""
        if self._channel is None:
            raise RuntimeError("the replicated dict has not joined yet")
        return self._channel

    # --- reading -------------------------------------------------------------------

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<ReplicatedDict {len(self._data)} keys>"

    def snapshot(self) -> dict[Any, Any]:
        """A copy of this replica, as a plain dict."""
        return dict(self._data)

    # --- writing -------------------------------------------------------------------

    async def put(self, key: Any, value: Any) -> None:
        """Set ``key`` to ``value`` on every member; returns once applied here.

        Raises ChannelClosed when the channel closes first, TypeError for a key that
        is not str, bytes or int or a value the channel cannot encode. A put cancelled
        before it returned may still be applied everywhere (it was sent).
        """
        _check_key(key)
        await self._write("put", key, value)

    async def delete(self, key: Any) -> bool:
        """Remove ``key`` on every member; returns whether it was there when the delete
        took its turn in the order (as applied here)."""
        _check_key(key)
        done: bool = await self._write("delete", key, None)
        return done

    async def clear(self) -> None:
        """Remove every key on every member."""
        await self._write("clear", None, None)

    async def _write(self, op: str, key: Any, value: Any) -> Any:
        channel = self.channel
        if self._closed:
            raise ChannelClosed("the replicated dict's channel is closed")
        token = next(self._tokens)
        waiter = _Waiter()
        self._waiting[token] = waiter
        try:
            await channel.rpc.call(_APPLY, op, key, value, self._id, token, mode="none")
            self._counters["writes"] += 1
            await waiter.done.wait()
        finally:
            del self._waiting[token]
        if not waiter.applied:
            raise ChannelClosed("the channel closed before the write was applied here")
        return waiter.result

    def _on_apply(self, op: str, key: Any, value: Any, writer: bytes, token: int) -> None:
        """Apply one write, in the channel's delivery order (the RPC handler)."""
        data = self._data
        if op == "put":
            data[key] = value
            result: Any = None
        elif op == "delete":
            result = data.pop(key, _MISSING) is not _MISSING
        elif op == "clear":
            data.clear()
            result = None
        else:
            raise ValueError(f"unknown replicated dict operation {op!r}")
        self._counters["applied"] += 1
        if writer == self._id:
            waiter = self._waiting.get(token)
            if waiter is not None:
                waiter.result = result
                waiter.applied = True
                waiter.done.set()

    # --- state transfer ----------------------------------------------------------------

    def get_state(self) -> list[list[Any]]:
        """The replica as [key, value] pairs (the channel sends it to a joiner)."""
        return [[key, value] for key, value in self._data.items()]

    def set_state(self, state: list[list[Any]]) -> None:
        """Replace the replica with a joiner's state (before any write reaches it)."""
        self._data = {key: value for key, value in state}
        self._counters["states_set"] += 1

    def stats(self) -> dict[str, Any]:
        """A plain snapshot: keys, writes sent from here and waiting, writes applied here,
        states received."""
        return {
            "keys": len(self._data),
            "waiting": len(self._waiting),
            **self._counters,
        }

    async def _watch(self) -> None:
        """Wake the writers waiting here once the channel closes (it ends the views)."""
        async for _ in self.channel.views():
            pass
        self._close()

    def _close(self) -> None:
        self._closed = True
        for waiter in self._waiting.values():
            waiter.done.set()


_MISSING = object()


def _check_key(key: Any) -> None:
    if isinstance(key, bool) or not isinstance(key, _KEY_TYPES):
        raise TypeError(f"replicated dict keys must be str, bytes or int, got {type(key).__name__}")


@asynccontextmanager
async def open_replicated_dict(
    cluster: str,
    stack: StackConfig | str | Path = "udp-total",
    name: str = "",
    **options: Any,
) -> AsyncIterator[ReplicatedDict]:
    """Join ``cluster`` with a replica of its dictionary; leave on exit.

    Opens the channel itself (`open_channel` with ``options``, e.g. ``network=``), so
    the dictionary is its state provider and its RPC method is there before the first
    write arrives: returns once this member joined and holds the group's dictionary as
    it stands (state transfer), with every later write applied in order. The stack
    must contain SEQUENCER (the ``udp-total`` preset): a stack that orders per sender
    only is refused with ValueError, since its replicas would not converge.
    """
    config = StackConfig.resolve(stack)
    if "SEQUENCER" not in config.names():
        raise ValueError(
            "a replicated dict needs SEQUENCER in the stack (the udp-total preset) to apply "
            f"writes in one order at every member; got {', '.join(config.names())}"
        )
    store = ReplicatedDict()
    async with open_channel(
        cluster, config, name, state=store, handlers={_APPLY: store._on_apply}, **options
    ) as channel:
        store._channel = channel
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(store._watch)
                try:
                    yield store
                finally:
                    nursery.cancel_scope.cancel()
        finally:
            store._close()
