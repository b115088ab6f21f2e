"""Actors in a group: an application actor that is a member of a group.

A `GroupActor` incarnation *is* a member. Its `run` opens a channel (joins
the group and, when the class defines ``get_state``/``set_state``, gets the
group's state first), then handles, one at a time in its own task:
`on_view` for every view, `on_message` for every group message, and
`handle` for what other actors put in its mailbox. ``get_state`` is called
in that same task, between two handlers, so the state it returns contains
exactly the group messages handled so far.

Run it under a `Supervisor` with the strategy the application picks
(`GroupActor.child_spec` makes the `ChildSpec`). When a handler raises, the
incarnation's channel closes and the supervisor starts a new incarnation,
which joins as a new member and gets the state from the group again: a
restarted member never resumes with state it cannot trust. A mailbox message
taken from the mailbox but not yet handled when the actor crashes is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

import trio

from triogroups._channel._facade import Channel
from triogroups._channel._inbox import Received
from triogroups._channel._open import ChannelOptions, run_channel
from triogroups._channel._state import StateProvider
from triogroups._errors import ChannelClosed
from triogroups.actors import Actor, ChildSpec, Restart
from triogroups.config import StackConfig
from triogroups.view import View

if TYPE_CHECKING:
    from triogroups.transports.sim import SimNetwork

__all__ = ["GroupActor"]

_T = TypeVar("_T")


class _Local:
    """A message from the actor's own mailbox, as it travels to the handler loop."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        self.message = message


class _Snapshot:
    """Run ``take`` in the actor's task between two handlers (state transfer)."""

    __slots__ = ("done", "error", "result", "take")

    def __init__(self, take: Callable[[], Awaitable[Any]]) -> None:
        self.take = take
        self.done = trio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


_Item = Received | View | _Local | _Snapshot


class _ActorSink:
    """The channel's sink for a group actor: everything goes through one handler loop."""

    def __init__(self, send: trio.MemorySendChannel[_Item]) -> None:
        self._send = send
        self._closed = False
        self._snapshot: _Snapshot | None = None

    async def deliver(self, item: Received) -> None:
        await self._put(item)

    async def view(self, view: View) -> None:
        await self._put(view)

    async def snapshot(self, take: Callable[[], Awaitable[_T]]) -> _T:
        request = self._snapshot = _Snapshot(take)
        await self._put(request)
        await request.done.wait()
        self._snapshot = None
        if request.error is not None:
            raise request.error
        result: _T = request.result
        return result

    async def _put(self, item: _Item) -> None:
        """Hand ``item`` to the handler loop; once it has stopped, nothing is handed over."""
        if not self._closed:
            try:
                await self._send.send(item)
                return
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._closed = True
        if isinstance(item, _Snapshot):
            item.error = ChannelClosed("the group actor has stopped")
            item.done.set()

    def close(self) -> None:
        self._closed = True
        if self._snapshot is not None and not self._snapshot.done.is_set():
            self._snapshot.error = ChannelClosed("the group actor has stopped")
            self._snapshot.done.set()


class GroupActor(Actor):
    """Base class of actors that are members of a group (see the module docstring).

    Override `on_message` (and `on_view`, `handle` as needed); define
    ``get_state()`` and ``set_state(state)`` to take part in state transfer.
    While running, ``self.channel`` is the member's `Channel`: send to the
    group with ``await self.channel.send(...)``.
    """

    restart: Restart = Restart.PERMANENT

    def __init__(
        self,
        cluster: str,
        stack: StackConfig | str | Path = "udp",
        member_name: str = "",
        *,
        network: SimNetwork | None = None,
        stack_options: dict[str, Any] | None = None,
        **channel_options: Unpack[ChannelOptions],
    ) -> None:
        self.cluster = cluster
        self.stack = stack
        self.member_name = member_name
        self.network = network
        self.stack_options = dict(stack_options or {})
        #: what `run` hands to each incarnation's channel (`open_channel`'s options)
        self.channel_options: ChannelOptions = channel_options
        self._channel: Channel | None = None

    @classmethod
    def child_spec(cls, name: str, *args: Any, **kwargs: Any) -> ChildSpec:
        """A `ChildSpec` that builds a fresh ``cls(*args, **kwargs)`` for every incarnation."""
        return ChildSpec(name, lambda: cls(*args, **kwargs), restart=cls.restart)

    @property
    def channel(self) -> Channel:
        """The actor's channel while it is a member; RuntimeError before it joined."""
        if self._channel is None:
            raise RuntimeError(f"group actor {self.name!r} is not a member yet")
        return self._channel

    async def on_message(self, msg: Received) -> None:
        """Hook: a message delivered by the group, in delivery order."""
        raise NotImplementedError(f"{type(self).__name__} must override on_message()")

    async def on_view(self, view: View) -> None:
        """Hook: a view was installed (the first one is the view this member joined)."""

    async def run(self, mailbox: trio.MemoryReceiveChannel[Any]) -> None:
        """Join, then handle group deliveries and mailbox messages one at a time; leave
        when the mailbox is closed or the actor is stopped."""
        send, items = trio.open_memory_channel[_Item](0)
        provider = self if isinstance(self, StateProvider) else None
        sink = _ActorSink(send)
        async with run_channel(
            self.cluster,
            self.stack,
            self.member_name,
            network=self.network,
            stack_options=self.stack_options,
            state=provider,
            sink=sink,
            **self.channel_options,
        ) as channel:
            self._channel = channel
            with items:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(_forward, mailbox, send, nursery.cancel_scope)
                    async for item in items:
                        await self._dispatch(item)

    async def _dispatch(self, item: _Item) -> None:
        if isinstance(item, Received):
            await self.on_message(item)
        elif isinstance(item, View):
            await self.on_view(item)
        elif isinstance(item, _Local):
            await self.handle(item.message)
        else:
            try:
                item.result = await item.take()
            except BaseException as exc:
                item.error = exc
                raise
            finally:
                item.done.set()
            return
        self._handled += 1

    def stats(self) -> dict[str, Any]:
        channel = self._channel
        return {} if channel is None else {"channel": channel.stats()}


async def _forward(
    mailbox: trio.MemoryReceiveChannel[Any],
    out: trio.MemorySendChannel[_Item],
    scope: trio.CancelScope,
) -> None:
    """Mailbox messages into the handler loop; when the mailbox ends, so does the actor."""
    async for message in mailbox:
        await out.send(_Local(message))
    scope.cancel()
