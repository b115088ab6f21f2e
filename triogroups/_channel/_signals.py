"""SIGTERM and Ctrl-C make `open_channel` leave the group, then end the process quietly.

A member that is told to stop should leave as it does on a normal exit: its
peers install the smaller view at once, instead of suspecting it once
failure detection times out. Without this, SIGTERM kills a Python process on
the spot, and Ctrl-C raises KeyboardInterrupt wherever the code happens to
be (inside a layer, say), so the graceful leave never runs either way.

Decisions:

- Signals are received only in the main thread (the only one Python
  delivers them to, and the only one `trio.open_signal_receiver` works in);
  a channel run by ``trio.run`` in another thread does nothing here.
- A signal the application handles itself is left alone: SIGTERM is taken
  only while its handler is ``SIG_DFL``, SIGINT only while it is Python's
  ``default_int_handler`` or Trio's KeyboardInterrupt handler. An
  application with its own `signal.signal` or `trio.open_signal_receiver`
  opened around the channel keeps it; ``handle_signals=False`` turns all of
  this off.
- One handler serves every channel of the process: installed when the first
  channel opens, the handlers it replaced put back when the last one closes
  (channels in sibling tasks close in any order, which a stack of
  `trio.open_signal_receiver` blocks would get wrong). It only hands the
  signal to Trio (`TrioToken.run_sync_soon`, safe in a signal handler).
- Every open channel leaves, each with its stack intact: a channel opened
  inside another one's block (same task or a task below it) is the one
  cancelled, and the `SignalExit` it raises unwinds the outer block, which
  leaves on its way out. Cancelling the outer block would cancel the inner
  channel's stack before it could leave. Channels in sibling tasks are
  each cancelled, and each raises only once all of them have left (at most
  ``close_timeout`` more): the first `SignalExit` cancels its siblings'
  tasks, stacks included, and would cut short a leave still under way.
- On the signal the body of the ``async with`` (or the join still under
  way) is cancelled, the member leaves (at most ``close_timeout``; a second
  signal stops waiting), the stack stops, and `open_channel` raises
  `SignalExit` with exit status 128 + the signal number: 143 for SIGTERM,
  130 for Ctrl-C. That is what a shell, systemd or Kubernetes report for a
  process ended by the signal, and what a JVM running JGroups exits with
  after its shutdown hooks; Python prints no traceback for a SystemExit.
  For Ctrl-C the exception is also a KeyboardInterrupt, so ``except
  KeyboardInterrupt`` works as it does with Trio. An application that
  wants Erlang's ``init:stop`` behaviour (status 0) catches `SignalExit`.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType, TracebackType
from typing import Any

import trio

__all__ = ["Interrupted", "SignalExit", "SignalLeave"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_log = logging.getLogger("triogroups.channel")
_TRIO_KI_MODULE = "trio._core._ki"


class SignalExit(SystemExit):
    """`open_channel` left the group because the process got ``signum``.

    A SystemExit with status 128 + ``signum``: uncaught, the process exits
    with that status and no traceback.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(128 + signum)
        self.signum = signum

    def __str__(self) -> str:
        return f"left the group on {signal.Signals(self.signum).name}"


class Interrupted(SignalExit, KeyboardInterrupt):
    """`SignalExit` for Ctrl-C (SIGINT): also a KeyboardInterrupt, as Trio users expect."""


def _free(signum: int) -> bool:
    """True if nobody but Python, Trio or the channels handles ``signum``."""
    handler = signal.getsignal(signum)
    if handler is _on_signal:
        return True
    if signum == signal.SIGINT:
        return handler is signal.default_int_handler or (
            getattr(handler, "__module__", None) == _TRIO_KI_MODULE
        )
    return handler == signal.SIG_DFL


#: The open channels that leave on a signal, and the handlers ours replaced.
_channels: list[SignalLeave] = []
_replaced: dict[int, Any] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    """The process's handler while channels are open: hand the signal to Trio."""
    if _channels:
        _channels[-1].token.run_sync_soon(_deliver, signum)


def _deliver(signum: int) -> None:
    """In Trio: every open channel takes the signal; only the innermost blocks are cancelled."""
    channels = list(_channels)
    inner = [
        leave
        for i, leave in enumerate(channels)
        if not any(_below(later.task, leave.task) for later in channels[i + 1 :])
    ]
    leaving = _Round(inner)
    for leave in channels:
        leave.signalled(signum, leaving if leave in inner else None)


class _Round:
    """The channels one signal cancelled: each raises once all of them have left."""

    def __init__(self, channels: list[SignalLeave]) -> None:
        self.leaving = set(map(id, channels))
        self.all_left = trio.Event()

    def left(self, leave: SignalLeave) -> None:
        self.leaving.discard(id(leave))
        if not self.leaving:
            self.all_left.set()


def _below(task: trio.lowlevel.Task, ancestor: trio.lowlevel.Task) -> bool:
    """True if ``task`` is ``ancestor`` or was started, at any depth, from it."""
    current: trio.lowlevel.Task | None = task
    while current is not None:
        if current is ancestor:
            return True
        nursery = current.parent_nursery
        current = None if nursery is None else nursery.parent_task
    return False


class SignalLeave:
    """One channel's part in signal handling: the scopes a signal cancels, and its exit.

    A context manager around the channel's life: entering installs the
    handler (first channel) or joins it, leaving gives the replaced handlers
    back (last channel).
    """

    def __init__(self, enabled: bool, who: str) -> None:
        self.enabled = enabled
        self.who = who
        self.signum: int | None = None
        self.body = trio.CancelScope()  # the join and the application's block
        self.leaving = trio.CancelScope(shield=True)  # the graceful leave
        self.token = trio.lowlevel.current_trio_token()
        self.task = trio.lowlevel.current_task()
        self.taken: tuple[int, ...] = ()
        self.round: _Round | None = None

    def __enter__(self) -> SignalLeave:
        if not self.enabled or threading.current_thread() is not threading.main_thread():
            return self
        self.taken = tuple(s for s in _SIGNALS if _free(s))
        for signum in self.taken:
            if signal.getsignal(signum) is not _on_signal:
                _replaced[signum] = signal.signal(signum, _on_signal)
        _channels.append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self not in _channels:
            return
        _channels.remove(self)
        if _channels:
            return
        for signum, handler in list(_replaced.items()):
            if signal.getsignal(signum) is _on_signal:  # else the application took it since
                signal.signal(signum, handler)
            del _replaced[signum]

    def signalled(self, signum: int, cancelled: _Round | None) -> None:
        """In Trio: the first signal cancels the body (if this channel is in ``cancelled``),
        a second one the leave."""
        if signum not in self.taken:
            if cancelled is not None:
                cancelled.left(self)
            return
        if self.signum is None:
            self.signum = signum
            _log.info("%s: %s received; leaving", self.who, signal.Signals(signum).name)
            if cancelled is not None:
                self.round = cancelled
                self.body.cancel()
        else:
            _log.warning(
                "%s: %s again; not waiting for the leave", self.who, signal.Signals(signum).name
            )
            self.leaving.cancel()

    def left(self) -> None:
        """This channel has left (or failed): the others of its round need not wait for it."""
        if self.round is not None:
            self.round.left(self)

    async def exit(self, timeout: float) -> None:
        """If a signal ended the channel: wait (at most ``timeout``) for the others it
        cancelled to leave, then raise `SignalExit` (`Interrupted` for SIGINT)."""
        if self.signum is None:
            return
        if self.round is not None:
            with trio.move_on_after(timeout):
                await self.round.all_left.wait()
        if self.signum == signal.SIGINT:
            raise Interrupted(self.signum)
        raise SignalExit(self.signum)
