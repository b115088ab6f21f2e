"""`open_channel`: build a member's stack, run it and join; on exit leave and stop.

The channel's tasks (the stack, its reader and dispatcher) run in a nursery
owned here, so the application sees one ``async with`` and, when something
fails, that one error rather than a group of them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import trio

from triogroups._channel._facade import Channel, channel_close_timeout, join, shut, start_tasks
from triogroups._channel._inbox import RECEIVE_BUFFER
from triogroups._channel._signals import SignalLeave
from triogroups._channel._state import StateProvider
from triogroups._renamed import renamed
from triogroups.config import StackConfig, sim_config
from triogroups.stack import Stack, StackOptions

if TYPE_CHECKING:
    from triogroups.transports.sim import SimNetwork

__all__ = ["ChannelOptions", "open_channel", "run_channel"]


class ChannelOptions(TypedDict, total=False):
    """`open_channel`'s options for the channel itself, as a `GroupActor` takes them on to
    its channel: each one typed, so a type checker checks the caller (`open_channel` says
    what each does and its default). ``network`` and ``state`` are not here: the actor
    takes the first as a parameter of its own and sets the second itself."""

    allow_pickle: bool
    handlers: Mapping[str, Callable[..., Any]] | None
    receive_buffer: int
    connect_timeout: float
    state_timeout: float
    close_timeout: float | None
    handle_signals: bool
    join_timeout: float | None  # deprecated: connect_timeout
    leave_timeout: float | None  # deprecated: close_timeout


def _unwrap(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception of a nursery's group, or the group when there are several."""
    if len(group.exceptions) == 1:
        inner = group.exceptions[0]
        if isinstance(inner, BaseExceptionGroup):
            return _unwrap(inner)
        return inner
    return group


@asynccontextmanager
async def open_channel(
    cluster: str,
    stack: StackConfig | str | Path = "udp",
    name: str = "",
    *,
    network: SimNetwork | None = None,
    allow_pickle: bool = False,
    state: StateProvider | None = None,
    handlers: Mapping[str, Callable[..., Any]] | None = None,
    receive_buffer: int = RECEIVE_BUFFER,
    connect_timeout: float = 60.0,
    state_timeout: float = 30.0,
    close_timeout: float | None = None,
    handle_signals: bool = True,
    join_timeout: float | None = None,
    leave_timeout: float | None = None,
    **stack_options: Unpack[StackOptions],
) -> AsyncIterator[Channel]:
    """Join ``cluster`` as member ``name``; leave on exit.

    ``stack`` is a preset name ("udp", "tcp", ...), a TOML path or a
    `StackConfig`; it must contain GMS. ``network`` runs the member on a
    `SimNetwork` instead of its transport (tests, virtual time).
    ``stack_options`` go to `Stack` (``channel_size``, ``max_restarts``,
    ``restart_window``, ``new_address``).

    Returns once the view that includes this member is installed and, when
    ``state`` (an object with ``get_state``/``set_state``) is given, once
    the group's state was set: the application sees no message before it.
    Raises JoinFailed or StateTransferFailed when that takes longer than
    ``connect_timeout`` or ``state_timeout``. ``handlers`` are RPC methods
    registered before joining, so no early call finds them missing.
    ``allow_pickle`` is a group-wide choice: with it the channel sends and
    unpickles cloudpickled payloads, without it it does neither; a member
    without it that receives a pickle drops it and tells the sender, which
    logs a warning and refuses further pickles to it.

    On exit the member leaves gracefully, waiting at most ``close_timeout``
    (also when the body was cancelled; by default GMS's own bound, see
    `Channel.aclose`), then the stack stops. If the stack
    fails beyond its restart intensity, that error is raised here.

    With ``handle_signals`` (the default), SIGTERM and Ctrl-C (SIGINT) that
    the application does not handle itself cancel the body, the member
    leaves gracefully, and `SignalExit` (status 143 or 130, no traceback;
    for Ctrl-C also a KeyboardInterrupt) is raised here. Only in the main
    thread; see `triogroups._channel._signals` for the rules.

    ``join_timeout`` and ``leave_timeout`` are the deprecated names of ``connect_timeout``
    and ``close_timeout`` (GMS has properties of those names that mean something else); they
    still work for this release, with a `DeprecationWarning`.
    """
    where = "open_channel()"
    connect_timeout = renamed(
        where,
        "join_timeout",
        join_timeout,
        "connect_timeout",
        connect_timeout,
        default=60.0,
        stacklevel=3,
    )
    close_timeout = renamed(
        where,
        "leave_timeout",
        leave_timeout,
        "close_timeout",
        close_timeout,
        default=None,
        stacklevel=3,
    )
    async with run_channel(
        cluster,
        stack,
        name,
        network=network,
        stack_options=stack_options,
        allow_pickle=allow_pickle,
        state=state,
        handlers=handlers,
        receive_buffer=receive_buffer,
        connect_timeout=connect_timeout,
        state_timeout=state_timeout,
        close_timeout=close_timeout,
        handle_signals=handle_signals,
    ) as channel:
        yield channel


@asynccontextmanager
async def run_channel(
    cluster: str,
    stack: StackConfig | str | Path,
    name: str,
    *,
    network: SimNetwork | None,
    stack_options: Mapping[str, Any],
    handle_signals: bool = True,
    **channel_options: Any,
) -> AsyncIterator[Channel]:
    """`open_channel` with every `Channel` option, including a custom ``sink``."""
    config = StackConfig.resolve(stack)
    if network is not None:
        config = sim_config(config, network)
    if "GMS" not in config.names():
        raise ValueError(
            f"a channel needs GMS in its stack to join a group, got {', '.join(config.names())}"
        )
    the_stack = Stack(config, cluster, name, **stack_options)
    channel = Channel(the_stack, **channel_options)
    stop = SignalLeave(handle_signals, f"{name or '-'}@{cluster}")
    try:
        with stop:
            async with trio.open_nursery() as nursery:
                await start_tasks(channel, nursery)
                try:
                    with stop.body:
                        await join(channel)
                        yield channel
                finally:
                    if not nursery.cancel_scope.cancel_called:
                        with stop.leaving:
                            await channel.aclose()
                    shut(channel)
                    nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        error = _unwrap(group)
        if error is group:
            raise
        raise error from error.__cause__
    finally:
        stop.left()
    await stop.exit(channel_close_timeout(channel))
