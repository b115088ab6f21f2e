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
  this off. A handler installed by another channel counts as free, so every
  channel of a process leaves (the innermost gets the signal; the
  `SignalExit` it raises unwinds the others, which leave on their way out).
- On the signal the body of the ``async with`` (or the join still under
  way) is cancelled, the member leaves (at most ``leave_timeout``; a second
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

import signal
import threading
import weakref
from collections.abc import Callable
from typing import Any

import trio

__all__ = ["Interrupted", "SignalExit", "SignalLeave"]

_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_TRIO_KI_MODULE = "trio._core._ki"

#: Handlers that channels' signal receivers installed (free for the next channel).
_CHANNEL_HANDLERS: weakref.WeakSet[Callable[..., Any]] = weakref.WeakSet()


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
    """True if nobody but Python, Trio or another channel handles ``signum``."""
    handler = signal.getsignal(signum)
    if handler in _CHANNEL_HANDLERS:
        return True
    if signum == signal.SIGINT:
        return handler is signal.default_int_handler or (
            getattr(handler, "__module__", None) == _TRIO_KI_MODULE
        )
    return handler == signal.SIG_DFL


class SignalLeave:
    """One channel's signal watch: the scopes a signal cancels, and the exit it causes."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.signum: int | None = None
        self.body = trio.CancelScope()  # the join and the application's block
        self.leaving = trio.CancelScope(shield=True)  # the graceful leave

    def signals(self) -> tuple[int, ...]:
        """The signals this channel should take (none outside the main thread)."""
        if not self.enabled or threading.current_thread() is not threading.main_thread():
            return ()
        return tuple(s for s in _SIGNALS if _free(s))

    async def watch(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Receive the signals until cancelled; started before the member joins."""
        signals = self.signals()
        if not signals:
            task_status.started()
            return
        with trio.open_signal_receiver(*signals) as received:
            installed = [signal.getsignal(s) for s in signals]
            _CHANNEL_HANDLERS.update(h for h in installed if callable(h))
            task_status.started()
            async for signum in received:
                if self.signum is None:
                    self.signum = signum
                    self.body.cancel()
                else:
                    self.leaving.cancel()

    def raise_if_signalled(self) -> None:
        """Raise `SignalExit` (`Interrupted` for SIGINT) if a signal ended the channel."""
        if self.signum == signal.SIGINT:
            raise Interrupted(self.signum)
        if self.signum is not None:
            raise SignalExit(self.signum)
