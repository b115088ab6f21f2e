"""The control path of a chaos member: a loopback UDP socket the runner drives its network with.

Each member incarnation binds one UDP socket on 127.0.0.1 (an ephemeral port it
announces in its progress lines). The runner sends it the member's whole
`NetworkState` as one JSON datagram (``{"seq": n, "ignore": [...], "loss": p,
"dup": p, "delay": s}``) and repeats it every second, so a datagram lost, a
member paused with SIGSTOP or a new incarnation all end up with the state in
force; `apply_state` is idempotent. The member answers ``{"ack": n}``. Nothing
here is reachable from another host, and a datagram that is not a state is
ignored.
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

import trio

from triogroups.address import Address
from triogroups.chaos._schedule import NetworkState
from triogroups.protocols.discard import Discard
from triogroups.stack import Stack

__all__ = ["apply_state", "decode_state", "encode_state", "send_state", "serve_control"]


def encode_state(seq: int, state: NetworkState) -> bytes:
    """The datagram that carries ``state`` (numbered ``seq``)."""
    body = {
        "seq": seq,
        "ignore": list(state.ignore),
        "loss": state.loss,
        "dup": state.dup,
        "delay": state.delay,
    }
    return json.dumps(body).encode()


def decode_state(data: bytes) -> tuple[int, NetworkState] | None:
    """``(seq, state)`` from a datagram, or None for anything else."""
    try:
        body = json.loads(data)
        state = NetworkState(
            tuple(str(u) for u in body["ignore"]),
            float(body["loss"]),
            float(body["dup"]),
            float(body["delay"]),
        )
        return int(body["seq"]), state
    except (ValueError, KeyError, TypeError):
        return None


async def apply_state(stack: Stack, state: NetworkState) -> None:
    """Make the stack's DISCARD, DUPL and DELAY layers (those it has) do what ``state`` says."""
    names = {proto.name for proto in stack.protocols}
    if "DISCARD" in names:
        discard = stack.protocol("DISCARD")
        assert isinstance(discard, Discard)
        discard.reset()
        discard.ignore(*(Address(int(u, 16)) for u in state.ignore))
        await stack.set_property("DISCARD", "up_loss", state.loss)
    if "DUPL" in names:
        await stack.set_property("DUPL", "incoming_copies", 1 if state.dup else 0)
        await stack.set_property("DUPL", "probability", state.dup or 1.0)
    if "DELAY" in names:
        await stack.set_property("DELAY", "in_delay", state.delay)


async def serve_control(stack: Stack, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the control socket for ``stack`` until cancelled; `started` with its port."""
    sock = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with sock:
        await sock.bind(("127.0.0.1", 0))
        task_status.started(sock.getsockname()[1])
        applied = -1
        while True:
            data, peer = await sock.recvfrom(65536)
            decoded = decode_state(data)
            if decoded is None:
                continue
            seq, state = decoded
            if seq >= applied:  # a repeat applies again: a restarted stack lost it
                await apply_state(stack, state)
                applied = seq
            await sock.sendto(json.dumps({"ack": seq}).encode(), peer)


async def send_state(
    sock: trio.socket.SocketType, port: int, seq: int, state: NetworkState
) -> None:
    """Send ``state`` to the member whose control socket is on ``port`` (no wait for the ack)."""
    with contextlib.suppress(OSError):  # a member that just died: the next round reaches
        await sock.sendto(encode_state(seq, state), ("127.0.0.1", port))  # its successor
