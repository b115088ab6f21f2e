"""NAKACK2's retransmit side: asking for missing messages, answering, purging what is stable.

A receiver asks the original sender for what it lacks with XMIT_REQ (a
`NakAckHeader2` naming the sender and the seqno ranges); the sender answers
from the messages it sent and still keeps, by multicasting them again or,
with ``use_mcast_xmit`` off, with a unicast XMIT_RSP. A sender whose last
message may be lost multicasts HIGHEST_SEQNO while it sends nothing new; a
StableDigest purges what every member delivered and shows what others
received and we still lack.

Plain synchronous code run by `Nakack2` (from ``up``, ``tick`` and
``down_event``): it never awaits and reads no clock. It keeps only what it
needs to decide when to ask again (and the last stability digest, for the
stats); the windows, the sent messages, the counters and the member's phase
are the shared `NakState`, which the send and receive paths read too.

Decisions where the seed and JGroups leave a choice:

- The retransmit task asks only for gaps it already saw at its previous run
  (JGRP-1539), at most ``max_xmit_req_size`` seqnos (a count, as in JGroups)
  per member and run, and no more than fit one bundle of the transport once
  encoded (JGRP-1868: the transport drops a larger message, so a request for
  many scattered gaps was lost at every run and repair stalled for good).
  The size is measured, not estimated: the wire codec encodes the request
  without its ranges, `fit_ranges` adds exactly what the ranges take, and a
  few bytes stay free for flags a layer below may add. The lowest gaps are
  asked first; the rest are asked at the next runs, as the first are filled.
- HIGHEST_SEQNO and STABILITY ask for the whole range above what we
  received, capped the same way. STABILITY asks only when the
  previous stability digest too showed more than we have (JGRP-2678), so a
  message that is merely in flight is not requested.
- HIGHEST_SEQNO (JGRP-1904) is skipped after new traffic and stops once a
  stability digest shows that every member delivered it (our sent messages
  are purged up to it). Until then it is repeated at every run, unless
  ``resend_last_seqno_max_times`` > 0 caps it (1 is JGroups' default). A
  departure from JGroups, which sends it once and leaves the rest to
  STABLE: a member that lost both the coordinator's last VIEW and its one
  announcement stays in the old view, its STABLE gossip names that view and
  is ignored, so no stability round completes and nothing else would tell
  it (issue 12 item 5). An idle sender pays one small multicast per
  ``xmit_interval`` until the next stability round; a stack without STABLE
  (whose sent messages are never purged either) should cap it.
- Only the original sender answers an XMIT_REQ (it names the sender);
  requests for others' messages are counted and ignored.
"""

from __future__ import annotations

from triogroups.address import Address
from triogroups.message import Flag, Message
from triogroups.protocols import ids
from triogroups.protocols._budget import PeerBudget
from triogroups.protocols.nakack2._context import NakContext
from triogroups.protocols.nakack2._header import (
    HIGHEST_SEQNO,
    VIEW_SEQNO,
    XMIT_REQ,
    XMIT_RSP,
    NakAckHeader2,
    expand_ranges,
    fit_ranges,
)
from triogroups.protocols.nakack2._state import NakState, Phase
from triogroups.view import Digest, View
from triogroups.wire import WireCodec

__all__ = ["Retransmitter"]

_ID = ids.NAKACK2
_DONT_LOOPBACK = int(Flag.DONT_LOOPBACK)
_SLACK = 8  # bytes kept free in a bundle: flags set below NAKACK2 may pack into a longer int


class Retransmitter:
    """What one NAKACK2 asked for and resent (see the module docstring)."""

    def __init__(self, nak: NakContext, state: NakState) -> None:
        self.nak = nak  # properties, address and output only
        self.state = state
        #: Per member: the highest seqno missing at the previous retransmit run.
        self._gaps_seen: dict[Address, int] = {}
        #: Per member: the highest seqno received according to the previous stability digest.
        self._stable_seen: dict[Address, int] = {}
        self._last_resent = 0
        self._resends = 0
        self.last_stable: Digest | None = None
        self._codec: WireCodec | None = None  # measures XMIT_REQs; made at the first one
        self._budget = PeerBudget()

    def forget(self, view: View | None) -> None:
        """Drop what was asked of members not in ``view`` (of everyone if None)."""
        for table in (self._gaps_seen, self._stable_seen):
            gone = list(table) if view is None else [m for m in table if m not in view]
            for member in gone:
                del table[member]

    # --- answering ---------------------------------------------------------------------

    def on_xmit_req(self, msg: Message, hdr: NakAckHeader2, now: float) -> None:
        """Answer from what we sent and still keep; requests for others' messages are ignored.

        A request for seqnos we purged (the requester was not in the view whose members
        all delivered them: a window a merge left alone, or one reopened for a member
        merged back) is also answered with VIEW_SEQNO at our purge point, so the
        requester moves past what can never come instead of asking for ever.

        At most ``max_xmits_per_interval`` messages per requester per interval
        (`PeerBudget`); the seqnos beyond are counted as ``xmits_capped``.
        """
        nak = self.nak
        counters = self.state.counters
        counters["xmit_reqs_received"] += 1
        me = nak._me()
        if hdr.sender != me or msg.src is None:
            counters["xmit_reqs_not_mine"] += 1
            return
        sent = self.state.sent
        seqnos = expand_ranges(hdr.ranges, sent.hd + 1, sent.hr, nak.max_xmit_req_size)
        if seqnos is None:
            counters["malformed"] += 1
            return
        if sent.hd and any(first <= sent.hd for first in hdr.ranges[::2]):
            # purged: the requester lacks what it can never get (it was not in the view
            # whose members all delivered it); VIEW_SEQNO moves its window past it
            counters["xmit_reqs_for_purged"] += 1
            nak._send_control(msg.src, NakAckHeader2(VIEW_SEQNO, sent.hd))
        interval = nak.xmit_interval if nak.xmit_interval > 0 else 1.0
        granted = self._budget.take(msg.src, len(seqnos), nak.max_xmits_per_interval, interval, now)
        if granted < len(seqnos):
            counters["xmits_capped"] += len(seqnos) - granted
            seqnos = seqnos[:granted]
        for seqno in seqnos:
            stored = sent.get(seqno)
            if stored is None:
                counters["xmit_not_found"] += 1
                continue
            copy = stored.copy()  # carries DONT_LOOPBACK: we delivered it when we sent it
            if not nak.use_mcast_xmit:
                copy.dest = msg.src
                copy.headers[_ID] = NakAckHeader2(XMIT_RSP, seqno, me)
            nak.send_down_one(copy)
            counters["xmit_rsps_sent"] += 1

    # --- asking --------------------------------------------------------------------------

    def on_highest_seqno(self, src: Address | None, seqno: int) -> None:
        """The sender's last message may be lost: ask for what lies above what we received."""
        nak = self.nak
        state = self.state
        state.counters["highest_seqno_received"] += 1
        if state.phase is not Phase.SERVER or nak.xmit_interval <= 0:
            return
        if src is None or src == nak._me():
            return
        win = state.windows.get(src)
        if win is not None and seqno > win.hr:
            self.request_range(src, win.hr + 1, seqno)

    def ask_for_gaps(self) -> None:
        """Ask each sender for the gaps that were already there at the previous run."""
        max_seqnos = self.nak.max_xmit_req_size
        gaps_seen = self._gaps_seen
        for member, win in self.state.windows.items():
            missing = win.missing(max_seqnos)
            if not missing:
                gaps_seen.pop(member, None)
                continue
            prev = gaps_seen.get(member)
            gaps_seen[member] = max(missing[-1], prev or 0)
            if prev is None:
                continue
            ask = [s for s in missing if s <= prev]
            if ask:
                self._send_xmit_req(member, ask)

    def on_stable_digest(self, digest: Digest) -> None:
        """Purge what everyone delivered; ask for what others have and we still lack."""
        state = self.state
        counters = state.counters
        self.last_stable = digest
        counters["stable_digests"] += 1
        me = self.nak._me()
        asking = state.phase is Phase.SERVER and self.nak.xmit_interval > 0
        for member, (delivered, received) in digest.items():
            if member == me:
                counters["purged"] += state.sent.purge(min(delivered, state.seqno))
                continue
            win = state.windows.get(member)
            if win is None or not asking:
                continue
            prev = self._stable_seen.get(member)
            if prev is not None and prev > win.hr:
                self.request_range(member, win.hr + 1, prev)
            self._stable_seen[member] = received

    def request_range(self, member: Address, first: int, last: int) -> None:
        last = min(last, first + self.nak.max_xmit_req_size - 1)
        self._send_xmit_req(member, range(first, last + 1))

    def _send_xmit_req(self, member: Address, seqnos: list[int] | range) -> None:
        """Ask ``member`` for the lowest of ``seqnos`` that fit one bundle once encoded."""
        counters = self.state.counters
        ranges, count = fit_ranges(seqnos, self._ranges_budget(member))
        if count < len(seqnos):
            counters["xmit_reqs_capped"] += 1
        if not count:
            return
        self.nak._send_control(member, NakAckHeader2(XMIT_REQ, 0, member, ranges))
        counters["xmit_reqs_sent"] += 1
        counters["xmit_seqnos_requested"] += count

    def _ranges_budget(self, member: Address) -> int:
        """Bytes an XMIT_REQ to ``member`` has for its ranges within one bundle.

        The wire codec encodes the request with empty ranges (one byte, the
        empty array, which `fit_ranges` counts again) to the member, as the
        transport will: what is left of the bundle is the ranges' budget.
        """
        nak = self.nak
        if self._codec is None:
            self._codec = WireCodec(nak.cluster)
        probe = nak._control(member, NakAckHeader2(XMIT_REQ, 0, member))
        envelope = len(self._codec.encode(member, nak._me(), [probe])) - 1
        return nak.bundle_size - envelope - _SLACK

    # --- HIGHEST_SEQNO -------------------------------------------------------------------

    def resend_last_seqno(self, force: bool = False) -> None:
        """HIGHEST_SEQNO (JGRP-1904): skipped after new traffic, repeated until it is stable.

        ``force`` (a leaving member's flush): sent after new traffic too, and
        beyond ``resend_last_seqno_max_times``.
        """
        nak = self.nak
        state = self.state
        seqno = state.seqno
        if seqno == 0 or (state.sent_since_xmit and not force):
            state.sent_since_xmit = False
            return
        state.sent_since_xmit = False
        if state.sent.hd >= seqno:
            return  # stable: every member delivered it
        limit = nak.resend_last_seqno_max_times
        if seqno == self._last_resent and limit and self._resends >= limit and not force:
            return
        if seqno > self._last_resent:
            self._last_resent, self._resends = seqno, 1
        else:
            self._resends += 1
        hdr = NakAckHeader2(HIGHEST_SEQNO, seqno)
        nak._send_control(None, hdr, _DONT_LOOPBACK)
        state.counters["highest_seqno_sent"] += 1
