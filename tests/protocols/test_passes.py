"""Every protocol keeps its `Protocol.passes_up` / `passes_down` promise.

The host moves a batch past an idle layer without calling its handler when the
protocol promised to pass such a batch on untouched (`_layer._ways.passes`). A broken
promise would silently skip work (a credit not counted, a timer not armed), so
each one is checked here against the handler itself: for any batch the promise
covers, in a fresh layer and in one that has real traffic behind it, at the time
it was started and much later, the handler must emit exactly that batch, in the
same direction, and nothing else, and change nothing in the protocol's state
(every attribute, recursively: counters, timers, windows, credits).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from triogroups import Message
from triogroups.events import FindMembers, GetDigest, ResumeStable, Suspect, SuspendStable
from triogroups.message import Flag
from triogroups.protocol import Passes, Protocol, protocol_class, protocol_names
from triogroups.testing import addresses, started, view_of

A, B, C = addresses("ABC")
_FOREIGN = 64_321  # a header no protocol knows (the application's, another layer's)
_TIMERS_UNTIL = 5.0  # a busy layer's timers have run until then; the batch comes later

#: Every registered protocol that may make a promise, with the direction it makes it for.
_PROMISES = [
    (name, direction)
    for name in protocol_names()
    for direction in ("up", "down")
    if getattr(protocol_class(name), f"passes_{direction}")
    is not getattr(Protocol, f"passes_{direction}")
]

#: Properties that make the busy state busier (a blocked sender, fragments pending).
_BUSY_PROPS: dict[str, dict[str, Any]] = {
    "MFC": {"max_credits": 3000, "min_threshold": 0.4},
    "UFC": {"max_credits": 3000, "min_threshold": 0.4},
    "FRAG": {"frag_size": 600},
}


def test_the_promises_checked_here_include_the_data_path_of_the_presets() -> None:
    promising = {name for name, _ in _PROMISES}
    assert promising >= {"PING", "MERGE3", "VERIFY_SUSPECT", "NAKACK2", "STABLE", "GMS"}
    assert promising >= {"UFC", "MFC", "FRAG", "TCPPING"}


def _covered(kind: str, dests: list[Any]) -> st.SearchStrategy[list[Message]]:
    """Batches of messages that a promise of ``kind`` covers."""
    dest: st.SearchStrategy[Any]
    if kind == "unicasts":
        dest = st.sampled_from([A, B, C])
    elif kind == "multicasts":
        dest = st.none()
    else:
        dest = st.sampled_from([None, A, B, C])
    flags = st.sets(st.sampled_from(list(Flag))).map(lambda fs: sum(int(f) for f in fs))
    message = st.builds(
        lambda d, src, size, f, tag: Message(
            d, bytes(size), src=src, flags=f, headers={_FOREIGN: tag}
        ),
        dest,
        st.sampled_from([A, B, C]),
        st.integers(0, 2500),
        flags,
        st.integers(0, 9),
    )
    return st.lists(message, min_size=1, max_size=6)


def _layer(name: str, busy: bool) -> Protocol:
    props = _BUSY_PROPS.get(name, {}) if busy else {}
    proto = started(protocol_class(name)(**props), A, view=view_of(A, B, C))
    if busy:  # real traffic both ways, part of what it sent coming back as from B
        batch = [Message(dest, bytes(1500), src=A) for dest in (None, B, None, C, None)]
        proto.down(batch, 0.5)
        sent = [m for item in proto.take_down() if type(item) is list for m in item]
        proto.take_up()
        echoed = [m.copy() for m in sent[::2]]
        for msg in echoed:
            msg.src = B
        if echoed:
            proto.up(echoed, 0.7)
        proto.take_up()
        proto.take_down()
        for _ in range(100):  # its timers run for a while: heartbeat slots, retransmissions
            deadline = proto.next_deadline()
            if deadline > _TIMERS_UNTIL:
                break
            proto.tick(deadline)
            proto.take_up()
            proto.take_down()
        proto.up_event(Suspect((C,)), _TIMERS_UNTIL)  # C looks dead: checks, view changes
        proto.take_up()
        proto.take_down()
    return proto


def _snapshot(msgs: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.dest, m.src, m.flags, m.payload, dict(m.headers)) for m in msgs]


def _state(value: Any, seen: frozenset[int] = frozenset()) -> Any:
    """Everything ``value`` holds, as plain comparable data (objects by their attributes,
    recursively): a protocol's whole state, not only what its `stats` show."""
    if value is None or isinstance(value, bool | int | float | str | bytes):
        return value
    if id(value) in seen:
        return ("<cycle>", type(value).__name__)
    seen = seen | {id(value)}
    if isinstance(value, dict):
        return ("dict", sorted((repr(k), _state(v, seen)) for k, v in value.items()))
    if isinstance(value, list | tuple) or type(value).__name__ == "deque":
        return (type(value).__name__, [_state(v, seen) for v in value])
    if isinstance(value, set | frozenset):
        return ("set", sorted(repr(v) for v in value))
    if callable(value) and not hasattr(value, "__dict__"):
        return ("callable", getattr(value, "__qualname__", repr(value)))
    attrs = dict(getattr(value, "__dict__", {}))
    for cls in type(value).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(value, slot):
                attrs[slot] = getattr(value, slot)
    if not attrs:
        return (type(value).__name__, repr(value))
    return (type(value).__name__, sorted((k, _state(v, seen)) for k, v in attrs.items()))


def _protocol_state(proto: Protocol) -> Any:
    return _state({k: v for k, v in vars(proto).items() if k not in ("_down_out", "_up_out")})


@pytest.mark.parametrize(("name", "direction"), _PROMISES)
@pytest.mark.parametrize("busy", [False, True], ids=["fresh", "busy"])
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_a_batch_the_promise_covers_comes_out_untouched_and_changes_nothing(
    name: str, direction: str, busy: bool, data: st.DataObject
) -> None:
    proto = _layer(name, busy)
    kind = getattr(proto, f"passes_{direction}")
    if kind is None:  # no promise in this state (a suspect being checked): nothing to hold
        return
    batch = data.draw(_covered(kind, [A, B, C]), label="batch")
    now = data.draw(st.sampled_from([_TIMERS_UNTIL, _TIMERS_UNTIL + 0.5, 1e4]), label="now")
    before = (_snapshot(batch), _protocol_state(proto), proto.next_deadline(), proto.blocks_down())
    getattr(proto, direction)(list(batch), now)
    same = proto.take_up() if direction == "up" else proto.take_down()
    other = proto.take_down() if direction == "up" else proto.take_up()
    assert other == []
    assert len(same) == 1 and type(same[0]) is list
    assert len(same[0]) == len(batch) and all(a is b for a, b in zip(same[0], batch, strict=True))
    after = (_snapshot(batch), _protocol_state(proto), proto.next_deadline(), proto.blocks_down())
    assert after == before


@pytest.mark.parametrize("kind", ["all", "unicasts", "multicasts"])
def test_a_message_with_the_protocols_own_header_or_of_the_other_kind_is_not_covered(
    kind: Passes,
) -> None:
    """The host's check (`_layer._ways.passes`) refuses a batch with one such message in it."""
    from triogroups._layer._ways import PASS_ASK_DOWN, PASS_ASK_UP, passes

    class _Promising(Protocol):
        passes_up = passes_down = kind

    proto, pid = _Promising(), 77
    dest = None if kind == "multicasts" else B
    plain = [Message(dest, b"x", src=B, headers={_FOREIGN: 1}) for _ in range(3)]
    own = Message(dest, b"x", src=B, headers={pid: object()})
    for mode in (PASS_ASK_UP, PASS_ASK_DOWN):
        assert passes(proto, mode, plain, pid)
        assert not passes(proto, mode, [*plain[:2], own, plain[2]], pid)
        if kind != "all":
            wrong = Message(B if kind == "multicasts" else None, b"x", src=B)
            assert not passes(proto, mode, [*plain, wrong], pid)
    assert not passes(Protocol(), PASS_ASK_UP, plain, pid)  # no promise, no pass


def test_a_promise_that_depends_on_state_is_withdrawn_while_the_state_lasts() -> None:
    """VERIFY_SUSPECT checking a suspect, and PING discovering, look at every message."""
    suspecting = _layer("VERIFY_SUSPECT", busy=True)
    assert suspecting.passes_up is None
    assert _layer("VERIFY_SUSPECT", busy=False).passes_up == "all"
    ping = protocol_class("PING")()
    ping.start(A, "test", 0.0)
    ping.down_event(FindMembers(2.0), 0.0)
    assert ping.passes_up is None
    assert _layer("PING", busy=False).passes_up == "all"


def test_stable_withdraws_its_promise_for_unicasts_while_max_bytes_waits_for_a_handler() -> None:
    """STABLE reached max_bytes while a merge suspended it; once resumed, the next
    handler call, even for a unicast, sends the digest request, so unicasts are not
    promised then (and are again once the request went out)."""
    stable = started(protocol_class("STABLE")(max_bytes=1000), A, view=view_of(A, B, C))
    assert stable.passes_up == "unicasts"
    stable.down_event(SuspendStable(60.0), 1.0)
    stable.up([Message(None, bytes(600), src=B), Message(None, bytes(600), src=C)], 2.0)
    stable.take_up()
    assert stable.take_down() == []  # suspended: no request
    stable.down_event(ResumeStable(), 3.0)
    assert stable.passes_up is None
    stable.up([Message(A, b"x", src=B)], 4.0)
    assert [type(item) for item in stable.take_down()] == [GetDigest]
    assert stable.passes_up == "unicasts"


def test_unicast3_withdraws_its_promise_while_its_retransmit_task_is_idle_with_work() -> None:
    """Any UNICAST3 handler arms the retransmit task if it has work and is not armed, so
    multicasts are promised only while that call would change nothing."""
    unicast3 = started(protocol_class("UNICAST3")(), A, view=view_of(A, B, C))
    unicast3.down([Message(B, b"x")], 1.0)
    unicast3.take_down()
    assert unicast3.passes_up == unicast3.passes_down == "multicasts"  # armed
    unicast3._next_tick = math.inf  # type: ignore[attr-defined]  # as if never armed
    assert unicast3.passes_up is None and unicast3.passes_down is None
    unicast3.up([Message(None, b"m", src=B)], 2.0)
    assert unicast3.next_deadline() < math.inf
    assert unicast3.passes_up == "multicasts"
