"""The member program the supervisor starts: one application function inside `open_channel`.

Run as ``python -m triogroups.supervisor._member --name A --cluster C --status-fd N
--command-fd M --parent PID``. The supervisor sends the payload (`_app.Payload`: the
application, its arguments and the stack) on stdin, its length first, and then keeps stdin
open; the member joins ``C`` as ``A`` and awaits ``app(channel, *args)``. It tells the
supervisor what happens on the status pipe (fd N, JSON lines: ``joined`` with its address,
``view`` per installed view) and reads the group's commands from fd M (`_commands`, through
`member_commands`); stdout and stderr are the application's own, and its log records from
``--log-level`` up (WARNING by default) go to stderr as text or, with ``--log-format json``,
as JSON lines (`_logs`).

How it ends, and with which status:
- the application returns: the member leaves the group, exit status 0;
- SIGTERM or SIGINT (the supervisor's request to stop, or Ctrl-C), the parent's death
  (PR_SET_PDEATHSIG) or EOF on stdin (the pipe from the parent): the application is cancelled,
  the channel closes, which leaves the group gracefully, exit status 0;
- the application raises, or joining fails: exit status 1, and the traceback goes to the
  supervisor on the status pipe (``crashed``: the error's line, the traceback, and whether it
  is a `StartupError`, which a restart would meet again), not to stderr: the supervisor shows a
  traceback once per group, so a crash loop does not print it at every restart.
This does not depend on `open_channel` handling signals: the member turns them into a leave.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import trio

from triogroups._channel import Channel, open_channel
from triogroups._layer import StartupError
from triogroups._log import said_elsewhere
from triogroups.address import Address
from triogroups.runtime import tune_gc
from triogroups.stack import Stack
from triogroups.supervisor._app import Payload
from triogroups.supervisor._commands import attach
from triogroups.supervisor._logs import LOG_FORMATS, LOG_LEVELS, configure_member_logging
from triogroups.supervisor._parent import die_with_parent, wait_parent_gone
from triogroups.view import View

__all__ = ["main"]

Emit = Callable[..., None]


def _hex(address: Address) -> list[str]:
    return [f"{address.uuid:032x}", address.name]


def _view_line(view: View) -> dict[str, Any]:
    coord = view.view_id.coord
    return {"id": [view.view_id.id, *_hex(coord)], "members": [_hex(m) for m in view.members]}


def _status_emitter(fd: int) -> Emit:
    out = os.fdopen(fd, "w", buffering=1)

    def emit(event: str, **fields: Any) -> None:
        out.write(json.dumps({"event": event, **fields}) + "\n")
        out.flush()

    return emit


async def _report_views(channel: Channel, emit: Emit) -> None:
    async for view in channel.views():
        emit("view", **_view_line(view))


class _Stopper:
    """Turns a stop request into the right cancellation: before the member joined, the join is
    abandoned; once joined, only the application is cancelled, so that `open_channel` can
    still leave the group through a running stack (cancelling the scope around
    `open_channel` would stop the stack before the leave)."""

    def __init__(self, outer: trio.CancelScope) -> None:
        self.outer = outer
        self.body: trio.CancelScope | None = None

    def stop(self) -> None:
        if self.body is None:
            self.outer.cancel()
        else:
            self.body.cancel()

    async def on_signal(self, signals: Any) -> None:
        async for _ in signals:
            self.stop()

    async def on_parent_gone(self) -> None:
        await wait_parent_gone()
        self.stop()


async def _run_bare(app: Any, args: argparse.Namespace, payload: Payload, emit: Emit) -> None:
    """``app(stack, *args)`` on a started `Stack` of its own: no channel, no group to join
    (``joined`` says the stack runs), no views reported. Stopping cancels the application,
    then the stack."""
    stack = Stack(payload.stack, args.cluster, args.name)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as outer:
            stopper = _Stopper(outer.cancel_scope)
            outer.start_soon(stopper.on_signal, signals)
            outer.start_soon(stopper.on_parent_gone)
            await outer.start(stack.run)
            with trio.CancelScope() as body:
                stopper.body = body
                emit("joined", address=_hex(stack.address))
                await app(stack, *payload.args)
            outer.cancel_scope.cancel()


async def _run(args: argparse.Namespace, payload: Payload, emit: Emit) -> None:
    app = payload.function()
    if payload.bare:
        await _run_bare(app, args, payload, emit)
        return
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as outer:
            stopper = _Stopper(outer.cancel_scope)
            outer.start_soon(stopper.on_signal, signals)
            outer.start_soon(stopper.on_parent_gone)
            async with open_channel(
                args.cluster, payload.stack, args.name, state=payload.state
            ) as channel:
                with trio.CancelScope() as body:
                    stopper.body = body
                    emit("joined", address=_hex(channel.address))
                    async with trio.open_nursery() as inner:
                        inner.start_soon(_report_views, channel, emit)
                        await app(channel, *payload.args)
                        inner.cancel_scope.cancel()
            outer.cancel_scope.cancel()


def _read_exactly(count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = os.read(sys.stdin.fileno(), count - len(data))
        if not chunk:
            sys.exit("the supervisor went away before it sent the payload")
        data += chunk
    return data


def _read_payload() -> bytes:
    """The payload from stdin, read unbuffered so nothing after it is taken from the pipe."""
    return _read_exactly(int.from_bytes(_read_exactly(8), "big"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--name", required=True)
    parser.add_argument("--cluster", required=True)
    parser.add_argument("--status-fd", required=True, type=int)
    parser.add_argument("--command-fd", required=True, type=int)
    parser.add_argument("--parent", required=True, type=int)
    parser.add_argument("--log-format", choices=LOG_FORMATS, default="text")
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="WARNING")
    args = parser.parse_args(argv)
    die_with_parent(args.parent)
    attach(args.command_fd)
    configure_member_logging(args.log_format, args.log_level)
    said_elsewhere("socket_buffers")  # the group's supervisor says it once for all
    payload = Payload.loads(_read_payload())
    emit = _status_emitter(args.status_fd)
    tune_gc()
    try:
        trio.run(_run, args, payload, emit)
    except Exception as exc:  # the app's own error, not the nurseries around it
        error = _unwrap(exc) if isinstance(exc, BaseExceptionGroup) else exc
        if not isinstance(error, Exception):
            raise
        _crashed(error, emit)
        sys.exit(1)


def _crashed(error: Exception, emit: Emit) -> None:
    """Tell the supervisor why the member ends: the error's line and its traceback."""
    if isinstance(error, StartupError):
        summary = str(error)
    else:
        summary = traceback.format_exception_only(error)[-1].rstrip("\n")
    text = "".join(traceback.format_exception(error))
    try:
        emit("crashed", error=summary, traceback=text, startup=isinstance(error, StartupError))
    except OSError:  # no supervisor to read it: stderr after all
        sys.stderr.write(text)


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        return _unwrap(inner) if isinstance(inner, BaseExceptionGroup) else inner
    return group


if __name__ == "__main__":
    main()
