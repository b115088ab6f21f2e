"""Hypothesis strategies for hostile protocol input: headers with any well-typed values.

A header of the wrong shape never reaches a protocol: the wire codec checks every
field against the header's annotations and drops the bundle (the wire targets
fuzz that). So what a protocol must survive is a well-typed header whose values
are anything: unknown message types, seqnos of 0, negative, far beyond the
window or at the ends of msgpack's range, XMIT requests over billion-long ranges,
views and digests of strangers, addresses of non-members or of the receiver
itself. The strategies draw such values from a field's annotation, so a new
header field is fuzzed without a change here.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from triogroups import Address, Digest, Flag, MergeView, Message, View, ViewId
from triogroups._wire_headers import _INT_HEADERS
from triogroups.events import Event, MembersFound, Merge, PingData, Suspect, Unsuspect
from triogroups.wire import header_type

#: Integers a protocol must take from a peer: small ones near real seqnos and ids,
#: the edges of fixed-width counters, and msgpack's whole range.
EDGES = [0, 1, 2, 3, 2**15, 2**16 - 1, 2**16, 2**31 - 1, 2**31, 2**32, 2**62, 2**63 - 1]
EDGES += [-1, -(2**31), -(2**63), 2**64 - 1]
ints = st.one_of(
    st.integers(-3, 40),
    st.sampled_from(EDGES),
    st.integers(-(2**63), 2**64 - 1),
)
#: Message types: every known one, a few unknown ones, and the extremes.
types_ = st.one_of(st.integers(-1, 12), st.sampled_from([255, 2**31, -(2**63), 2**64 - 1]))


def addresses(pool: Sequence[Address]) -> st.SearchStrategy[Address]:
    return st.sampled_from(list(pool))


#: View ids the codec accepts (0 .. 2**63 - 1; beyond is malformed on the wire).
view_ids = st.one_of(st.integers(0, 40), st.sampled_from([2**31, 2**62, 2**63 - 2, 2**63 - 1]))


def views(pool: Sequence[Address]) -> st.SearchStrategy[View]:
    members = st.lists(addresses(pool), min_size=1, max_size=len(pool), unique=True)
    plain = st.builds(
        lambda vid, coord, ms: View(ViewId(vid, coord), ms), view_ids, addresses(pool), members
    )
    merged = st.builds(
        lambda vid, coord, ms, subs: MergeView(ViewId(vid, coord), ms, subs),
        view_ids,
        addresses(pool),
        members,
        st.lists(plain, max_size=3),
    )
    return st.one_of(plain, merged)


def digests(pool: Sequence[Address]) -> st.SearchStrategy[Digest]:
    seqno = st.one_of(st.integers(0, 40), st.sampled_from([2**31, 2**62, 2**63 - 1]))
    pair = st.tuples(seqno, seqno).map(lambda p: (min(p), max(p)))
    return st.dictionaries(addresses(pool), pair, max_size=len(pool)).map(Digest)


def values(tp: Any, pool: Sequence[Address], field: str = "") -> st.SearchStrategy[Any]:
    """Any value of annotation ``tp`` the codec would accept, chosen to hurt."""
    if field == "type":
        return types_
    if tp is int:
        return ints
    if tp is bool:
        return st.booleans()
    if tp is float:
        return st.floats(allow_nan=True)
    if tp is str:
        return st.one_of(st.just("127.0.0.1"), st.text(max_size=8))
    if tp is bytes:
        return st.binary(max_size=16)
    if tp is Address:
        return addresses(pool)
    if tp is View:
        return views(pool)
    if tp is MergeView:
        return views(pool).filter(lambda v: isinstance(v, MergeView))
    if tp is Digest:
        return digests(pool)
    if tp is ViewId:
        return st.builds(ViewId, view_ids, addresses(pool))
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = (a for a in args if a is not type(None))
        return st.one_of(st.none(), values(inner, pool))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        item = values(args[0], pool)
        huge = st.just((1, 2**63 - 1)) if args[0] is int else st.just(())
        return st.one_of(st.lists(item, max_size=8).map(tuple), huge)
    if origin is tuple:
        return st.tuples(*(values(a, pool) for a in args))
    raise TypeError(f"no hostile values for {tp!r}")


def headers(protocol_id: int, pool: Sequence[Address]) -> st.SearchStrategy[Any]:
    """A header of the class registered for ``protocol_id``, every field drawn by `values`;
    where the header may also be a bare int (NAKACK2's and MCAST's MSG), often that."""
    cls = header_type(protocol_id)
    assert cls is not None, protocol_id
    if cls is int:
        return ints
    hints = typing.get_type_hints(cls)
    fields: tuple[str, ...] = cls._fields  # type: ignore[attr-defined]
    built = st.builds(cls, *(values(hints[f], pool, f) for f in fields))
    return st.one_of(built, ints) if protocol_id in _INT_HEADERS else built


FLAGS = [Flag.OOB, Flag.DONT_BUNDLE, Flag.DONT_LOOPBACK, Flag.NO_RELIABILITY, Flag.NO_FC]
FLAGS += [Flag.DONT_BLOCK, Flag.INTERNAL]


def flags() -> st.SearchStrategy[int]:
    return st.lists(st.sampled_from(FLAGS), max_size=3).map(lambda fs: sum(set(fs), 0))


def messages(
    protocol_ids: Sequence[int],
    senders: Sequence[Address],
    pool: Sequence[Address],
    me: Address,
) -> st.SearchStrategy[Message]:
    """A message from one of ``senders`` to ``me`` or the group, with one or two headers
    of ``protocol_ids`` (the second one often a protocol's below, as a real stack adds)."""

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        chosen = draw(st.lists(st.sampled_from(list(protocol_ids)), min_size=1, max_size=2))
        hdrs = {pid: draw(headers(pid, pool)) for pid in chosen}
        return Message(
            draw(st.sampled_from([None, me])),
            draw(st.binary(max_size=24)),
            src=draw(addresses(senders)),
            flags=draw(flags()),
            headers=hdrs,
        )

    return build()


def mutated(msg: Message, pool: Sequence[Address]) -> st.SearchStrategy[Message]:
    """``msg`` with one header field replaced by a hostile value of the same type."""

    @st.composite
    def build(draw: st.DrawFn) -> Message:
        out = msg.copy()
        out.headers = dict(msg.headers)
        if not out.headers:
            return out
        pid = draw(st.sampled_from(sorted(out.headers)))
        hdr = out.headers[pid]
        if type(hdr) is int:  # a bare seqno: another hostile int
            out.headers[pid] = draw(ints)
            return out
        if not hdr._fields:
            return out
        hints = typing.get_type_hints(type(hdr))
        field = draw(st.sampled_from(hdr._fields))
        out.headers[pid] = hdr._replace(**{field: draw(values(hints[field], pool, field))})
        return out

    return build()


def peer_events(pool: Sequence[Address]) -> st.SearchStrategy[Event]:
    """Events a lower layer derives from peers' messages, with hostile contents: discovery
    answers (MembersFound), suspicions (Suspect, Unsuspect) and merges (Merge) naming
    strangers, the receiver itself, and views of any id and shape."""
    some = st.lists(addresses(pool), max_size=len(pool)).map(tuple)
    ping = st.builds(
        PingData,
        addresses(pool),
        st.tuples(st.sampled_from(["", "127.0.0.1", "::1"]), st.integers(-1, 70000)),
        st.booleans(),
    )
    return st.one_of(
        st.lists(ping, max_size=4).map(lambda r: MembersFound(tuple(r))),
        some.map(Suspect),
        addresses(pool).map(Unsuspect),
        st.builds(
            Merge,
            st.lists(views(pool), max_size=3).map(tuple),
            some,
        ),
    )
