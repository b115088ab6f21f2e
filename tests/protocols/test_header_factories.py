"""Header factories equal the keyword form they stand for.

The send paths build one header per message with ``tuple.__new__`` (no
NamedTuple keyword-default call); each such construction lives in a named
factory beside its NamedTuple, and these tests check it builds exactly the
header the plain, checked keyword call builds.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from triogroups import Flag, Message
from triogroups.extend import Mcast, Nakack2
from triogroups.protocols import ids
from triogroups.protocols.mcast import MSG as mcast_msg
from triogroups.protocols.mcast import McastHeader, as_header
from triogroups.protocols.unicast3._common import DATA, Unicast3Header
from triogroups.testing import addresses, down_messages, started, up_messages, view_of


@given(seqno=st.integers(1, 2**64 - 1), conn_id=st.integers(0, 2**16 - 1), count=st.integers(0, 5))
def test_unicast3_header_data_run_equals_the_keyword_form(
    seqno: int, conn_id: int, count: int
) -> None:
    hdrs = Unicast3Header.data_run(seqno, conn_id, count)
    assert all(type(hdr) is Unicast3Header for hdr in hdrs)
    assert hdrs == [
        Unicast3Header(type=DATA, seqno=s, conn_id=conn_id, first=s == 1)
        for s in range(seqno, seqno + count)
    ]
    assert [hdr.first for hdr in hdrs] == [s == 1 for s in range(seqno, seqno + count)]


@given(first=st.integers(1, 3), count=st.integers(1, 40))
def test_nakack2_bare_seqno_header_and_own_copy_equal_the_plain_forms(
    first: int, count: int
) -> None:
    """NAKACK2 stamps each multicast with its bare seqno (an int: a MSG) and copies it for
    its own delivery in line, where `Message.copy` costs a call per message; guarded
    through the real send path: what it sends carries consecutive seqnos, and what it
    delivers to itself equals `Message.copy` of it, every slot set, its header map its own."""
    a, b = addresses("AB")
    nak = started(Nakack2(), a, view=view_of(a, b))
    nak.down([Message(None, b"warm-up") for _ in range(first - 1)], 0.0)
    down_messages(nak)
    up_messages(nak)
    msgs = [Message(None, b"x%d" % i, flags=Flag.OOB if i % 3 else 0) for i in range(count)]
    nak.down(msgs, 0.0)
    sent = down_messages(nak)
    hdrs = [m.headers[ids.NAKACK2] for m in sent]
    assert all(type(hdr) is int for hdr in hdrs)
    assert hdrs == list(range(first, first + count))
    assert all(m.flags & Flag.DONT_LOOPBACK for m in sent)
    own = up_messages(nak)
    assert len(own) == count
    for mine, msg in zip(own, sent, strict=True):
        plain = msg.copy()
        plain.src = a
        plain.flags &= ~Flag.DONT_LOOPBACK
        assert [getattr(mine, n) for n in Message.__slots__] == [
            getattr(plain, n) for n in Message.__slots__
        ]
        assert mine.headers is not msg.headers


@given(count=st.integers(1, 40))
def test_mcast_msg_header_is_the_bare_seqno_and_reads_as_the_keyword_form(count: int) -> None:
    """MCAST stamps each multicast with its bare seqno (an int: a MSG); guarded through
    the real send path: consecutive seqnos, which `as_header` reads as exactly the
    keyword form's header."""
    a, b = addresses("AB")
    mcast = started(Mcast(), a, view=view_of(a, b))
    mcast.down([Message(None, b"x%d" % i) for i in range(count)], 0.0)
    hdrs = [m.headers[ids.MCAST] for m in down_messages(mcast) if ids.MCAST in m.headers]
    assert all(type(hdr) is int for hdr in hdrs)
    assert hdrs == list(range(1, len(hdrs) + 1))
    assert [as_header(h) for h in hdrs] == [
        McastHeader(type=mcast_msg, seqno=s) for s in range(1, len(hdrs) + 1)
    ]
    assert hdrs
