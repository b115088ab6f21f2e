"""The compiled send loops and the pure-Python source they are compiled from agree (issue 43).

`triogroups._channel._send_loop` makes and numbers the application's multicasts (the
channel's send); `triogroups.protocols._down_loops` holds the per-message loops of the
protocols' down paths (NAKACK2's numbering and the copy it delivers at once, FRAG's size
scan, the flow control layers' sums). The compiled forms make messages with the C
constructor of ``_message_layout.pxd`` and read their slots from the declared layout. For
any batch both forms return the same results and leave the batch changed alike, and the
channel and the protocols run the form this process chose.
"""

from __future__ import annotations

import gc
import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._kinds import examples
from tests.test_compiled_core import _python
from triogroups import Address, Flag, Message, _compiled
from triogroups.protocols import ids

ROOT = Path(__file__).resolve().parent.parent
A = Address.random("A")
B = Address.random("B")

_BUILT = importlib.import_module("triogroups.protocols._down_loops")
COMPILED: ModuleType | None = _BUILT if _compiled.is_compiled(_BUILT) else None
PURE = _compiled.pure("protocols._down_loops")
needs_compiled = pytest.mark.skipif(COMPILED is None, reason="no compiled core in this checkout")
_SEND_BUILT = importlib.import_module("triogroups._channel._send_loop")
SEND_COMPILED: ModuleType | None = _SEND_BUILT if _compiled.is_compiled(_SEND_BUILT) else None
SEND_PURE = _compiled.pure("_channel._send_loop")

_FLAGS = (0, Flag.OOB, Flag.DONT_LOOPBACK, Flag.NO_RELIABILITY, Flag.NO_FC, Flag.INTERNAL)
_flags = st.lists(st.sampled_from(_FLAGS), max_size=3).map(lambda fs: sum(set(map(int, fs))))
_batches = st.lists(
    st.builds(
        Message,
        st.sampled_from([None, None, A, B]),
        st.binary(max_size=40),
        src=st.sampled_from([None, A]),
        flags=_flags | st.sampled_from([2**70, 2**70 | 4]),
        headers=st.dictionaries(st.integers(1, 99), st.integers(0, 9), max_size=3),
    ),
    max_size=12,
)


def _state(msgs: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.dest, m.src, m.flags, m.headers, m.payload) for m in msgs]


@needs_compiled
@settings(max_examples=examples(300))
@given(_batches, st.integers(0, 2**64), st.sampled_from([7, 57]))
def test_both_forms_number_multicasts_alike(batch: list[Message], seqno: int, pid: int) -> None:
    """NAKACK2's numbering: the same multicasts numbered from ``seqno + 1`` (a seqno
    beyond 64 bits too), the same copies to deliver (new messages from ``A``, each
    with a header map of its own), and the batch left the same (DONT_LOOPBACK set on
    what was copied); unicasts and NO_RELIABILITY multicasts untouched."""
    results = []
    for form in (COMPILED, PURE):
        assert form is not None
        msgs = [m.copy() for m in batch]
        index = {id(m): i for i, m in enumerate(msgs)}
        kept, local = form.number_multicasts(msgs, seqno, A, pid)
        assert all(type(m) is Message for m in local)
        assert not {id(m) for m in local} & index.keys()
        assert not {id(m.headers) for m in local} & {id(m.headers) for m in msgs}
        results.append(([index[id(m)] for m in kept], _state(local), _state(msgs)))
    assert results[0] == results[1]
    wanted = [
        i for i, m in enumerate(batch) if m.dest is None and not m.flags & Flag.NO_RELIABILITY
    ]
    kept_at, local_state, _ = results[1]
    assert kept_at == wanted
    assert [s[3][pid] for s in local_state] == [
        seqno + 1 + n for n, i in enumerate(wanted) if not batch[i].flags & Flag.DONT_LOOPBACK
    ]
    assert all(s[0] is None and s[1] is A for s in local_state)


@needs_compiled
@settings(max_examples=examples(300))
@given(_batches)
def test_both_forms_of_the_size_and_cost_scans_agree(batch: list[Message]) -> None:
    """FRAG's largest payload, UFC's and MFC's cost of a batch (one destination of their
    kind, or None for several), STABLE's and MFC's bytes not looped back: as the plain
    rules say."""
    assert COMPILED is not None
    largest = max((len(m.payload) for m in batch), default=0)
    assert COMPILED.largest_payload(batch) == PURE.largest_payload(batch) == largest
    for multicast in (True, False):
        ours = [m for m in batch if (m.dest is None) is multicast]
        total = sum(len(m.payload) for m in ours if not m.flags & Flag.NO_FC)
        one = len({id(m.dest) for m in ours}) <= 1
        want = ((ours[0].dest if ours else "none"), total) if one else None
        assert _cost(COMPILED, batch, multicast) == _cost(PURE, batch, multicast) == want
    for skip in (0, int(Flag.NO_FC), int(Flag.NO_FC | Flag.OOB)):
        unlooped = sum(
            len(m.payload)
            for m in batch
            if m.dest is None and m.flags & Flag.DONT_LOOPBACK and not m.flags & skip
        )
        assert COMPILED.unlooped_bytes(batch, skip) == PURE.unlooped_bytes(batch, skip) == unlooped


def _cost(form: ModuleType, batch: list[Message], multicast: bool) -> Any:
    """``form``'s `flow_cost`, its `NO_DESTINATION` (one object per form) as "none"."""
    cost = form.flow_cost(batch, multicast)
    if cost is None or cost[0] is not form.NO_DESTINATION:
        return cost
    return "none", cost[1]


@needs_compiled
def test_the_compiled_constructor_makes_whole_messages_the_collector_sees() -> None:
    """The copies the compiled loop makes (``_message_layout.pxd``'s `new_message`) are
    plain `Message`s: every slot set, tracked by the garbage collector as one made by
    ``object.__new__``, and freed with their contents."""
    assert COMPILED is not None
    batch = [Message(None, b"payload", headers={1: 2})]
    _, (copy,) = COMPILED.number_multicasts(batch, 0, A, 7)
    assert (copy.dest, copy.src, copy.flags, copy.headers, copy.payload) == (
        None,
        A,
        0,
        {1: 2, 7: 1},
        b"payload",
    )
    assert gc.is_tracked(copy)
    copy.headers["cycle"] = copy  # a cycle only the collector frees
    del copy
    assert gc.collect() >= 1


@needs_compiled
@settings(max_examples=examples(300))
@given(_batches, st.integers(0, 2**64), st.binary(max_size=40))
def test_both_forms_of_the_channels_send_work_agree(
    batch: list[Message], seqno: int, payload: bytes
) -> None:
    """The channel's send: `multicast` makes the same whole message in each form (the
    constructor's, with the application seqno), and `stamp` numbers the same messages
    of any batch (multicasts neither OOB nor DONT_LOOPBACK) and returns the same last
    seqno."""
    assert SEND_COMPILED is not None
    made = [form.multicast(payload, seqno) for form in (SEND_COMPILED, SEND_PURE)]
    assert (
        _state(made[:1]) == _state(made[1:]) == [(None, None, 0, {ids.APP_SEQNO: seqno}, payload)]
    )
    assert all(type(m) is Message for m in made)
    results = []
    for form in (SEND_COMPILED, SEND_PURE):
        msgs = [m.copy() for m in batch]
        results.append((form.stamp(msgs, seqno), _state(msgs)))
    assert results[0] == results[1]
    ordered = [m for m in batch if m.dest is None and not m.flags & (Flag.OOB | Flag.DONT_LOOPBACK)]
    assert results[1][0] == seqno + len(ordered)


def test_the_channel_and_the_protocols_run_the_send_loops_of_the_chosen_form() -> None:
    """The channel, NAKACK2, FRAG, STABLE and the flow control layers run the compiled loops
    where they were built, the ``.py`` with ``TRIOGROUPS_PURE_PYTHON=1``: the same
    choice as the codec's."""
    code = (
        "import triogroups.protocols.nakack2 as n, triogroups.protocols.frag as f\n"
        "import triogroups.protocols._flow as fc, triogroups._channel._outgoing as o\n"
        "import triogroups.protocols.stable as s\n"
        "assert n.DOWN_LOOPS is f.DOWN_LOOPS is fc.DOWN_LOOPS is s.DOWN_LOOPS\n"
        "assert o.multicast is o.SEND.multicast and o.stamp is o.SEND.stamp\n"
        "print(n.DOWN_LOOPS.__name__, o.SEND.__name__)"
    )
    assert _python(code, TRIOGROUPS_PURE_PYTHON="1").split() == [
        "triogroups.protocols._down_loops_pure",
        "triogroups._channel._send_loop_pure",
    ]
    assert _python(code).split() == [
        "triogroups.protocols._down_loops",
        "triogroups._channel._send_loop",
    ]
    if COMPILED is not None and SEND_COMPILED is not None:
        files = _python(code.replace("__name__", "__file__")).split()
        assert ["_down_loops.cpython" in files[0], "_send_loop.cpython" in files[1]] == [
            True,
            True,
        ]
