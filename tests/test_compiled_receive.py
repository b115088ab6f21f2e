"""The compiled core of the receive path and the pure-Python source it is compiled from agree
(issue 43).

Each module here is built by Cython into an extension module when a C compiler is there and
runs as its ``.py`` otherwise (or with ``TRIOGROUPS_PURE_PYTHON=1``); both forms must give
the same results for any input, and the process must run the form `triogroups._compiled`
chose. The codec's, the bundler's and the layer host's compiled loops are
tests/test_compiled_core.py's.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from tests.test_compiled_core import _python
from triogroups import Address, Flag, Message, _compiled
from triogroups._channel._inbox import Received, received
from triogroups._channel._state import Alignment
from triogroups._payload import encode_payload
from triogroups.protocols import ids

A = Address.random("A")
B = Address.random("B")
C = Address.random("C")


def _forms(name: str) -> tuple[ModuleType | None, ModuleType]:
    """The compiled form of ``name`` (None where the build made none) and its pure form."""
    built = importlib.import_module(f"triogroups.{name}")
    return (built if _compiled.is_compiled(built) else None), _compiled.pure(name)


HANDOFF_COMPILED, HANDOFF_PURE = _forms("_channel._handoff")

_payloads = st.one_of(
    st.tuples(st.just(0), st.binary(max_size=6)),  # untagged: the bytes as they are
    st.tuples(st.just(int(Flag.TAGGED)), st.integers(0, 9).map(encode_payload)),
    st.tuples(st.just(int(Flag.TAGGED)), st.just(encode_payload(b"x", pickle=True))),
    st.tuples(st.just(int(Flag.TAGGED)), st.sampled_from([b"", b"\x07", b"\x01\xc1"])),  # bad
)
_headers = st.fixed_dictionaries(
    {},
    optional={
        ids.APP_SEQNO: st.integers(0, 12),
        ids.RPC: st.none(),
        ids.STATE_TRANSFER: st.none(),
        ids.NAKACK2: st.integers(0, 3),
    },
)


@st.composite
def _items(draw: st.DrawFn) -> Message | Received:
    """A message the channel's reader may find in a batch: mostly plain multicasts and
    unicasts of three senders, some carrying RPC or state, some without a source, some
    with a payload that does not decode, and a record the dispatcher was already given."""
    if draw(st.integers(0, 19)) == 0:
        return received(A, b"r", b"r", False, True)
    flags, payload = draw(_payloads)
    flags |= draw(st.sampled_from([0, 0, int(Flag.OOB)]))
    src = draw(st.sampled_from([A, A, B, C, None]))
    dest = draw(st.sampled_from([None, None, A]))
    return Message(dest, payload, src=src, flags=flags, headers=draw(_headers))


def _alignment(delivered: dict[Address, int], floor: dict[Address, int]) -> Alignment:
    align = Alignment()
    align.install(floor.items())
    align.delivered.update(delivered)
    return align


_tables = st.dictionaries(st.sampled_from([A, B, C]), st.integers(0, 8), max_size=3)


@pytest.mark.skipif(HANDOFF_COMPILED is None, reason="no compiled core in this checkout")
@settings(max_examples=examples(500))
@given(
    st.lists(_items(), max_size=14),
    st.integers(0, 4),
    st.integers(1, 16),
    _tables,
    _tables,
    st.booleans(),
)
def test_both_forms_of_the_channels_hand_off_agree(
    batch: list[Message | Received],
    start: int,
    limit: int,
    delivered: dict[Address, int],
    floor: dict[Address, int],
    allow_pickle: bool,
) -> None:
    """`_channel._handoff.ready_run`, whose compiled form reads `Message`'s slots in the
    declared layout: from any batch, index, limit and alignment (delivered seqnos and a
    state's floor), both forms stop at the same message, make the same records (payloads
    decoded or refused alike) and leave the same alignment (delivered seqnos, gaps), and
    what they hand over is what `Alignment.accept` message by message accepts."""
    start = min(start, len(batch))
    outcomes: list[Any] = []
    for form in (HANDOFF_COMPILED, HANDOFF_PURE):
        assert form is not None
        align = _alignment(delivered, floor)
        out: list[Received] = []
        done = form.ready_run(batch, start, out, limit, align, allow_pickle)
        assert all(type(r) is Received for r in out)
        outcomes.append((done, [tuple(r) for r in out], align.delivered, align.gaps))
    assert outcomes[0] == outcomes[1]
    done, records = outcomes[1][0], outcomes[1][1]
    assert start <= done <= min(len(batch), start + limit)
    plain = _alignment(delivered, floor)
    accepted = []
    for msg in batch[start:done]:
        assert type(msg) is Message and msg.src is not None
        seqno = msg.headers.get(ids.APP_SEQNO)
        if seqno is None or plain.accept(msg.src, seqno):
            accepted.append((msg.src, msg.flags & Flag.OOB != 0, msg.dest is None))
    assert [(r[0], r[3], r[4]) for r in records] == accepted
    assert (plain.delivered, plain.gaps) == outcomes[1][2:]


def test_the_channel_runs_the_hand_off_of_the_chosen_form() -> None:
    """The channel's reader runs the compiled hand-off where it was built, the ``.py`` with
    ``TRIOGROUPS_PURE_PYTHON=1``: the same choice as the wire codec's."""
    code = (
        "import triogroups._channel._delivery as d, triogroups._compiled as c\n"
        "print(c.is_compiled(d.HANDOFF), d.HANDOFF.__name__)"
    )
    pure = _python(code, TRIOGROUPS_PURE_PYTHON="1")
    assert "False triogroups._channel._handoff_pure" in pure
    expected = "False" if HANDOFF_COMPILED is None else "True"
    assert f"{expected} triogroups._channel._handoff" in _python(code)


UP_SCANS_COMPILED, UP_SCANS_PURE = _forms("protocols._up_scans")
_up_batches = st.lists(
    st.builds(
        Message,
        st.sampled_from([None, None, A]),
        st.binary(max_size=6),
        src=st.sampled_from([A, A, B, None]),
        flags=st.sampled_from([0, 0, int(Flag.NO_FC), int(Flag.OOB), 0x1FF]),
        headers=st.dictionaries(st.sampled_from([ids.UFC, ids.MFC, ids.STABLE, 7]), st.none()),
    ),
    max_size=12,
)


@pytest.mark.skipif(UP_SCANS_COMPILED is None, reason="no compiled core in this checkout")
@settings(max_examples=examples(500))
@given(_up_batches, st.sampled_from([ids.UFC, ids.MFC, ids.STABLE]), st.booleans())
def test_both_forms_of_the_up_scans_agree(batch: list[Message], pid: int, multicast: bool) -> None:
    """`protocols._up_scans`, whose compiled form reads `Message`'s slots in the declared
    layout: for any batch, both forms give STABLE the same multicast bytes (or the same
    -1 for a batch with one of its headers), flow control the same bytes per sender and
    the same answer whether control messages are in it, and NAKACK2 and MCAST the same
    answer whether a message has a flag set: each the plain rule."""
    assert UP_SCANS_COMPILED is not None
    carries = any(pid in m.headers for m in batch)
    plain = -1 if carries else sum(len(m.payload) for m in batch if m.dest is None)
    assert UP_SCANS_COMPILED.multicast_bytes(batch, pid) == plain
    assert UP_SCANS_PURE.multicast_bytes(batch, pid) == plain
    expected: dict[Address, int] = {}
    for m in batch:
        counted = (m.dest is None) == multicast and not m.flags & Flag.NO_FC
        if pid not in m.headers and counted and m.src is not None and m.payload:
            expected[m.src] = expected.get(m.src, 0) + len(m.payload)
    for form in (UP_SCANS_COMPILED, UP_SCANS_PURE):
        used: dict[Address, int] = {B: 1}
        assert form.bytes_by_sender(batch, pid, multicast, used) is carries
        assert used == {B: 1} | {s: n + (1 if s is B else 0) for s, n in expected.items()}
    for flags in (int(Flag.INTERNAL), int(Flag.NO_FC | Flag.OOB), int(Flag.OOB)):
        flagged = any(m.flags & flags for m in batch)
        assert UP_SCANS_COMPILED.any_flagged(batch, flags) is flagged
        assert UP_SCANS_PURE.any_flagged(batch, flags) is flagged


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("protocols.stable", "protocols._up_scans"),
        ("protocols._flow", "protocols._up_scans"),
        ("protocols._view_digest", "protocols._up_scans"),
    ],
)
def test_the_layers_run_the_up_scans_of_the_chosen_form(module: str, name: str) -> None:
    """STABLE, flow control and the view digest of NAKACK2 and MCAST read batches with
    the compiled loops where they were built, the ``.py`` with
    ``TRIOGROUPS_PURE_PYTHON=1``."""
    code = (
        f"import triogroups.{module} as m, triogroups._compiled as c\n"
        "print(c.is_compiled(m.UP_SCANS), m.UP_SCANS.__name__)"
    )
    assert f"False triogroups.{name}_pure" in _python(code, TRIOGROUPS_PURE_PYTHON="1")
    expected = "False" if UP_SCANS_COMPILED is None else "True"
    assert f"{expected} triogroups.{name}\n" in _python(code)
