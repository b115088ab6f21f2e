"""Every protocol keeps its `Protocol.passes_up` / `passes_down` promise.

The host moves a batch past an idle layer without calling its handler when the
protocol promised to pass such a batch on untouched (`_layer._passes`). A broken
promise would silently skip work (a credit not counted, a timer not armed), so
each one is checked here against the handler itself: for any batch the promise
covers, in a fresh layer and in one that has real traffic behind it, at the time
it was started and much later, the handler must emit exactly that batch, in the
same direction, and nothing else, and change nothing in the protocol's state
(every attribute, recursively: counters, timers, windows, credits).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triogroups import Message
from triogroups.events import Suspect
from triogroups.message import Flag
from triogroups.protocol import Protocol, protocol_class, protocol_names
from triogroups.testing import addresses, started, view_of

A, B, C = addresses("ABC")
_FOREIGN = 64_321  # a header no protocol knows (the application's, another layer's)
_TIMERS_UNTIL = 5.0  # a busy layer's timers have run until then; the batch comes later

#: Every registered protocol that makes a promise, with the direction it makes it for.
_PROMISES = [
    (name, direction)
    for name in protocol_names()
    for direction in ("up", "down")
    if getattr(protocol_class(name), f"passes_{direction}") is not None
]

#: Properties that make the busy state busier (a blocked sender, fragments pending).
_BUSY_PROPS: dict[str, dict[str, Any]] = {
    "MFC": {"max_credits": 3000, "min_threshold": 0.4},
    "UFC": {"max_credits": 3000, "min_threshold": 0.4},
    "FRAG": {"frag_size": 600},
}


def test_the_promises_checked_here_include_the_data_path_of_the_presets() -> None:
    assert {name for name, _ in _PROMISES} >= {"MERGE3", "GMS", "FRAG", "NAKACK2", "MFC", "UFC"}


def _covered(kind: str, dests: list[Any]) -> st.SearchStrategy[list[Message]]:
    """Batches of messages that a promise of ``kind`` covers."""
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
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_batch_the_promise_covers_comes_out_untouched_and_changes_nothing(
    name: str, direction: str, busy: bool, data: st.DataObject
) -> None:
    proto = _layer(name, busy)
    kind = getattr(proto, f"passes_{direction}")
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


@pytest.mark.parametrize(("name", "direction"), _PROMISES)
def test_a_message_with_the_protocols_own_header_is_not_covered(name: str, direction: str) -> None:
    """The host's check (`_passes`) refuses a batch with one such message in it."""
    from triogroups._layer import _PASS_MODES, _passes

    cls = protocol_class(name)
    kind = getattr(cls, f"passes_{direction}")
    dest = None if kind == "multicasts" else B
    plain = [Message(dest, b"x", src=B, headers={_FOREIGN: 1}) for _ in range(3)]
    assert _passes(plain, _PASS_MODES[kind], cls.id)
    own = Message(dest, b"x", src=B, headers={cls.id: object()})
    assert not _passes([*plain[:2], own, plain[2]], _PASS_MODES[kind], cls.id)
    if kind != "all":
        wrong = Message(B if kind == "multicasts" else None, b"x", src=B)
        assert not _passes([*plain, wrong], _PASS_MODES[kind], cls.id)
