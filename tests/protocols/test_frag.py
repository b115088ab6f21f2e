"""FRAG: large messages are split, reassembled whole, and bounded in size and memory."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Address, Flag, Message, PropertyError, StackConfig, View, ViewId
from triogroups.events import ViewChange
from triogroups.protocols import ids
from triogroups.protocols.frag import Frag, FragHeader
from triogroups.testing import down_messages, open_cluster, up_messages, wait_until
from triogroups.wire import WireCodec

A, B, C = (Address(i, n) for i, n in enumerate("ABC", start=1))
FRAG = ids.FRAG
UPPER_ID = ids.RPC


def _frag(me: Address = A, **props: Any) -> Frag:
    frag = Frag(**{"frag_size": 1000, **props})
    frag.start(me, "test", 0.0)
    frag.down_event(ViewChange(View(ViewId(1, A), [A, B, C])), 0.0)
    frag.take_down()
    return frag


def _payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(n)


def _split(sender: Frag, msg: Message) -> list[Message]:
    """What ``sender`` sends down for ``msg``, as received from ``sender``."""
    sender.down([msg], 0.0)
    frags = down_messages(sender)
    for f in frags:
        f.src = sender.local_address
    return frags


# --- properties ---------------------------------------------------------------------------


def test_frag_defaults_and_size_rules() -> None:
    frag = Frag()
    assert (frag.frag_size, frag.max_message_size, frag.max_pending_size) == (
        60_000,
        16 << 20,
        32 << 20,
    )
    assert Frag(frag_size="8KB").frag_size == 8192
    with pytest.raises(PropertyError, match=r"FRAG\.frag_size must be > 0, got 0"):
        Frag(frag_size=0)
    with pytest.raises(PropertyError, match=r"FRAG.max_pending_size must be >= max_message_size"):
        Frag(max_message_size="2MB", max_pending_size="1MB")
    with pytest.raises(PropertyError, match=r"FRAG.max_pending_size must be >= max_message_size"):
        frag.set_property("max_message_size", "64MB", 0.0)
    assert frag.max_message_size == 16 << 20


def test_frag_refuses_a_frag_size_that_does_not_fit_the_transport_bundle() -> None:
    with pytest.raises(
        PropertyError, match=r"FRAG.frag_size must be <= SIM.max_bundle_size - 1024"
    ):
        StackConfig.of("SIM", ("FRAG", {"frag_size": 65_000})).validate()
    StackConfig.of("SIM", "FRAG").validate()  # the defaults fit


def test_frag_header_travels_through_the_wire_codec() -> None:
    codec = WireCodec("test")
    msg = Message(None, b"x", headers={FRAG: FragHeader(7, 2, 3)})
    (back,) = codec.decode(codec.encode(None, A, [msg])).messages
    assert back.headers[FRAG] == FragHeader(7, 2, 3)


# --- sending -------------------------------------------------------------------------------


def test_frag_small_messages_pass_untouched() -> None:
    frag = _frag()
    batch = [Message(None, _payload(1000)), Message(B, b"")]
    frag.down(batch, 0.0)
    assert frag.take_down() == [batch] and batch[0].headers == {}


def test_frag_large_message_is_split_into_frag_size_slices_with_copied_headers() -> None:
    frag = _frag()
    payload = _payload(10_001)
    upper = {UPPER_ID: ("upper",)}
    frags = _split(frag, Message(B, payload, flags=Flag.OOB, headers=dict(upper)))
    assert [f.headers[FRAG] for f in frags] == [FragHeader(0, i, 11) for i in range(11)]
    assert [len(f.payload) for f in frags] == [1000] * 10 + [1]
    assert b"".join(f.payload for f in frags) == payload
    assert all(
        f.dest == B and f.flags == Flag.OOB and f.headers[UPPER_ID] == ("upper",) for f in frags
    )
    again = _split(frag, Message(None, payload))
    assert {f.headers[FRAG].id for f in again} == {1}  # ids count per sender
    stats = frag.stats()
    assert (stats["fragmented"], stats["fragments_sent"]) == (2, 22)


def test_frag_oversized_message_is_dropped_and_counted_and_check_size_refuses_it() -> None:
    frag = _frag(max_message_size=5000, max_pending_size=5000)
    frag.check_size(5000)
    with pytest.raises(
        ValueError, match=r"message of 5001 bytes exceeds FRAG\.max_message_size 5000"
    ):
        frag.check_size(5001)
    keep = Message(None, b"small")
    frag.down([Message(None, _payload(5001)), keep, Message(None, _payload(5000))], 0.0)
    sent = down_messages(frag)
    assert sent[0] is keep and len(sent) == 1 + 5  # the 5000-byte one went, in 5 fragments
    assert frag.stats()["refused_oversized"] == 1
    unsplit = _frag(frag_size=1000, max_message_size=500, max_pending_size=500)
    unsplit.down([Message(None, _payload(501)), keep], 0.0)  # the limit holds below frag_size
    assert down_messages(unsplit) == [keep]


# --- receiving ------------------------------------------------------------------------------


def test_frag_reassembles_out_of_order_into_the_original_message() -> None:
    sender, receiver = _frag(B), _frag(C)
    payload = _payload(4500)
    frags = _split(sender, Message(None, payload, flags=Flag.OOB, headers={UPPER_ID: ("u",)}))
    for f in reversed(frags[1:]):
        receiver.up([f], 1.0)
    assert receiver.take_up() == [] and receiver.stats()["pending_messages"] == 1
    receiver.up([frags[0]], 1.0)
    (whole,) = up_messages(receiver)
    assert whole.payload == payload and whole.src == B and whole.dest is None
    assert whole.flags == Flag.OOB and whole.headers == {UPPER_ID: ("u",)}
    assert receiver.stats()["pending_bytes"] == 0 and receiver.stats()["reassembled"] == 1


def test_frag_keeps_messages_apart_per_sender_and_id_and_keeps_batch_order() -> None:
    b, c, receiver = _frag(B), _frag(C), _frag(A)
    b1, b2 = _payload(2500, 1), _payload(2500, 2)
    c1 = _payload(2500, 3)
    fb1 = _split(b, Message(None, b1))
    fb2 = _split(b, Message(None, b2))
    fc1 = _split(c, Message(None, c1))  # same id 0 as fb1, other sender
    assert fb1[0].headers[FRAG].id == fc1[0].headers[FRAG].id
    small = Message(A, b"small", src=B)
    receiver.up([fb1[0], fc1[0], fb2[0], fb2[1], fc1[1], fb1[1], fb1[2], small, fb2[2]], 1.0)
    receiver.up([fc1[2]], 1.0)
    delivered = up_messages(receiver)
    assert [m.payload for m in delivered] == [b1, b"small", b2, c1]


def test_frag_duplicate_and_late_fragments_are_ignored() -> None:
    sender, receiver = _frag(B), _frag(C)
    frags = _split(sender, Message(None, _payload(2500)))
    receiver.up([frags[0], frags[0], frags[1], frags[2], frags[2], frags[1]], 1.0)
    stats = receiver.stats()
    assert len(up_messages(receiver)) == 1
    assert (stats["duplicates"], stats["stale"], stats["pending_messages"]) == (1, 2, 0)


@pytest.mark.parametrize(
    "headers",
    [
        [FragHeader(0, 3, 3)],
        [FragHeader(0, -1, 3)],
        [FragHeader(0, 0, 0)],
        [FragHeader(0, 0, 3), FragHeader(0, 1, 2)],  # two different counts for one message
    ],
)
def test_frag_malformed_fragment_headers_are_dropped_and_leave_nothing_behind(
    headers: list[FragHeader],
) -> None:
    receiver = _frag()
    receiver.up([Message(A, b"x" * 10, src=B, headers={FRAG: h}) for h in headers], 1.0)
    stats = receiver.stats()
    assert receiver.take_up() == [] and stats["malformed"] == 1
    assert stats["pending_messages"] == 0 and stats["pending_bytes"] == 0


def test_frag_view_change_discards_partial_messages_of_members_that_left() -> None:
    b, c, receiver = _frag(B), _frag(C), _frag(A)
    fb = _split(b, Message(None, _payload(2500, 1)))
    fc = _split(c, Message(None, _payload(2500, 2)))
    receiver.up([fb[0], fc[0]], 1.0)
    receiver.down_event(ViewChange(View(ViewId(2, A), [A, C])), 2.0)  # B left
    stats = receiver.stats()
    assert stats["discarded_left"] == 1 and stats["pending_senders"] == 1
    receiver.up(fb[1:] + fc[1:], 2.0)
    assert [m.src for m in up_messages(receiver)] == [C]


def test_frag_pending_bytes_per_sender_are_capped_by_evicting_the_oldest_partial() -> None:
    sender = _frag(B, max_message_size=3000, max_pending_size=5000)
    receiver = _frag(A, max_message_size=3000, max_pending_size=5000)
    parts = [_split(sender, Message(None, _payload(3000, i))) for i in range(4)]
    receiver.up([parts[0][0], parts[0][1], parts[1][0], parts[1][1]], 1.0)  # 4000 pending
    receiver.up([parts[2][0], parts[2][1]], 1.0)  # 6000 > 5000: message 0 goes
    stats = receiver.stats()
    assert stats["evicted"] == 1 and stats["pending_bytes"] == 4000
    receiver.up([parts[0][2], parts[3][0]], 1.0)  # late fragment of message 0; 5000 pending
    assert receiver.stats()["stale"] == 1 and receiver.stats()["pending_bytes"] == 5000
    receiver.up([parts[1][2], parts[2][2]], 1.0)  # completing fragments need no room
    delivered = [m.payload for m in up_messages(receiver)]
    assert delivered == [b"".join(f.payload for f in p) for p in parts[1:3]]
    assert receiver.stats()["evicted"] == 1 and receiver.stats()["pending_bytes"] == 1000


@settings(max_examples=examples(50), deadline=None)
@given(
    size=st.integers(min_value=0, max_value=20_000),
    frag_size=st.integers(min_value=1, max_value=3000),
    seed=st.integers(min_value=0, max_value=2**32),
)
def test_frag_any_order_with_duplicates_yields_the_original_exactly_once(
    size: int, frag_size: int, seed: int
) -> None:
    if -(-size // frag_size) > 2000:
        frag_size = size // 2000 + 1  # keep the example small
    sender, receiver = _frag(B, frag_size=frag_size), _frag(C, frag_size=frag_size)
    payload = _payload(size, seed)
    frags = _split(sender, Message(None, payload, headers={UPPER_ID: ("u",)}))
    rng = random.Random(seed)
    arrivals = frags + rng.sample(frags, k=len(frags) // 3)
    rng.shuffle(arrivals)
    for f in arrivals:
        receiver.up([f], 1.0)
    (whole,) = up_messages(receiver)
    assert whole.payload == payload and whole.headers == {UPPER_ID: ("u",)}
    assert receiver.stats()["pending_bytes"] == 0


# --- whole stacks on the simulated network ---------------------------------------------------


async def test_frag_large_multicasts_and_unicasts_arrive_whole_and_in_order(
    autojump_clock: Any,
) -> None:
    stack = StackConfig.of("SIM", ("FRAG", {"frag_size": 1000}))
    async with open_cluster(3, stack, seed=8) as cluster:
        a, b, c = cluster.members
        await a.send_many([b"before", _payload(50_000, 1), b"after"])
        await b.send(_payload(20_000, 2), to=c.address)
        await cluster.wait_until_delivered(timeout=10)
        assert _payload(50_000, 1) in [m.payload for m in c.delivered]
        assert a.protocol("FRAG").stats()["fragments_sent"] == 50


async def test_frag_whole_messages_arrive_over_a_lossy_network_with_reliability_below(
    autojump_clock: Any,
) -> None:
    """Default frag_size: every fragment is a datagram of its own, so loss hits fragments."""
    stack = StackConfig.of("SIM", "PING", "NAKACK2", "UNICAST3", "STABLE", "GMS", "FRAG")
    async with open_cluster(3, stack, seed=9) as cluster:
        a, b, c = cluster.members
        cluster.network.set_faults(loss=0.2, duplicate=0.05, max_delay=0.02)
        for i in range(5):
            await a.send(_payload(250_000 + i, i))
        await b.send(_payload(200_000, 9), to=c.address)
        # polls cheaply; the contract check compares payloads
        await wait_until(
            lambda: [len(m.delivered) for m in cluster.members] == [5, 5, 6],
            timeout=120,
            interval=0.5,
        )
        cluster.check_contract()  # FIFO, exactly once, complete and intact
        assert cluster.network.stats()["lost"] > 0
        assert c.protocol("FRAG").stats()["reassembled"] == 6


async def test_frag_oversized_send_is_refused_without_crashing_the_stack(
    autojump_clock: Any,
) -> None:
    stack = StackConfig.of(
        "SIM", ("FRAG", {"frag_size": 1000, "max_message_size": 10_000, "max_pending_size": 10_000})
    )
    async with open_cluster(2, stack, seed=10) as cluster:
        a, b = cluster.members
        await a.stack.send([Message(None, _payload(10_001))])
        await a.send(b"next")
        with pytest.raises(ValueError, match=r"exceeds FRAG\.max_message_size 10000"):
            a.protocol("FRAG").check_size(10_001)
        await cluster.wait_until_delivered(timeout=10)
        assert [m.payload for m in b.delivered] == [b"next"]
        assert a.protocol("FRAG").stats()["refused_oversized"] == 1
        assert a.stack.crash_reports == []
