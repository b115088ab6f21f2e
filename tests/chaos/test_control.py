"""The chaos control path: the runner's datagrams set a member's DISCARD, DUPL and DELAY."""

from __future__ import annotations

import json
import socket
import uuid

import trio

from triogroups import Address, open_channel
from triogroups.chaos import (
    NetworkState,
    chaos_config,
    decode_state,
    encode_state,
    serve_control,
)


def test_a_state_survives_encoding_and_anything_else_decodes_to_none() -> None:
    state = NetworkState(("ab" * 16,), 0.25, 0.1, 0.05)
    assert decode_state(encode_state(4, state)) == (4, state)
    for junk in (b"", b"\xff", b"[]", b'{"seq": 1}', b'{"seq": "x", "ignore": 3}'):
        assert decode_state(junk) is None


async def _ask(sock: trio.socket.SocketType, port: int, seq: int, state: NetworkState) -> int:
    await sock.sendto(encode_state(seq, state), ("127.0.0.1", port))
    with trio.fail_after(10):
        data, _ = await sock.recvfrom(1024)
    return int(json.loads(data)["ack"])


async def test_control_socket_sets_partition_loss_dup_and_delay_then_clears_them() -> None:
    """The member applies a state, acks it, and applies the next one in full (idempotent)."""
    config = chaos_config("udp", 1)
    other = Address.random("X")
    async with (
        open_channel(f"ctl-{uuid.uuid4().hex[:8]}", config, "A") as ch,
        trio.open_nursery() as nursery,
    ):
        port = await nursery.start(serve_control, ch.stack)
        sock = trio.socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        with sock:
            await sock.bind(("127.0.0.1", 0))
            await sock.sendto(b"not a state", ("127.0.0.1", port))
            state = NetworkState((f"{other.uuid:032x}",), 0.3, 0.2, 0.1)
            assert await _ask(sock, port, 1, state) == 1
            discard = ch.stack.protocol("DISCARD")
            assert discard.stats()["ignored"] == [str(Address(other.uuid))]
            assert discard.properties()["up_loss"] == 0.3
            assert ch.stack.protocol("DUPL").properties()["incoming_copies"] == 1
            assert ch.stack.protocol("DUPL").properties()["probability"] == 0.2
            assert ch.stack.protocol("DELAY").properties()["in_delay"] == 0.1
            assert await _ask(sock, port, 2, NetworkState()) == 2
            assert discard.stats()["ignored"] == [] and discard.properties()["up_loss"] == 0.0
            assert ch.stack.protocol("DUPL").properties()["incoming_copies"] == 0
            assert ch.stack.protocol("DELAY").properties()["in_delay"] == 0.0
        nursery.cancel_scope.cancel()
