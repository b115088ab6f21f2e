"""The UNICAST2 protocol: the rules of the package docstring, over the state in `_state`."""

from __future__ import annotations

import math
import random
from typing import Any

from triogroups.address import Address
from triogroups.events import Disconnect, Event
from triogroups.message import Message
from triogroups.properties import Duration, Int, PropertyError, Size, at_least, positive
from triogroups.protocol import Protocol
from triogroups.protocols import ids
from triogroups.protocols._budget import PeerBudget
from triogroups.protocols._stats import reliable_stats
from triogroups.protocols._table import SeqnoTable
from triogroups.protocols.unicast2._state import (
    _CONTROL,
    _COUNTERS,
    _ID,
    _MAX_FIRST_SEQNO_ASKS,
    _MAX_TOMBSTONES,
    _MAX_XMIT_REQ,
    _NO_RELIABILITY,
    _OOB,
    DATA,
    RECV_TRANSITIONS,
    SEND_FIRST_SEQNO,
    STABLE,
    XMIT_REQ,
    Peer,
    RecvAction,
    RecvInput,
    Unicast2Header,
    _Ask,
    _RecvEntry,
    _SendEntry,
    _Tombstone,
)
from triogroups.view import View

__all__ = ["Unicast2"]


class Unicast2(Protocol):
    """Reliable unicast, receiver-driven (see the module docstring)."""

    name = "UNICAST2"
    COUNTERS = _COUNTERS
    id = ids.UNICAST2

    xmit_interval = Duration(
        0.5,
        doc="interval of the retransmit task (XMIT_REQ for gaps)",
        check=positive,
    )
    stable_interval = Duration(
        1.0,
        doc="interval at which receivers send STABLE to senders",
        check=positive,
    )
    max_stable_msgs = Int(
        5,
        doc="STABLE messages sent for the same (hd, hr) at most",
        check=at_least(1),
    )
    max_bytes = Size(
        1_000_000,
        doc="bytes received from a sender before a STABLE",
        check=positive,
    )
    conn_expiry_timeout = Duration(
        60.0,
        doc="idle connections are closed after this long (0: never); see the module docstring",
        check=at_least(0),
    )
    max_retransmit_time = Duration(
        60.0,
        doc="connections to non-members are closed this long after opening (0: never)",
        check=at_least(0),
    )
    max_xmits_per_interval = Int(
        5000,
        doc="messages resent for one member's XMIT_REQs per xmit_interval; "
        "the rest of its requests is ignored and counted",
        check=at_least(1),
    )
    max_receive_window = Int(
        100_000,
        doc="seqnos kept per connection ahead of the next one to deliver; a message "
        "beyond is dropped and counted (a sender that never fills its gaps)",
        check=at_least(1),
    )

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._send: dict[Address, _SendEntry] = {}
        self._recv: dict[Address, _RecvEntry] = {}
        self._tombs: dict[Address, _Tombstone] = {}
        self._age_out: dict[Address, float] = {}
        self._asked_first: dict[Address, _Ask] = {}
        self._asks: dict[Address, tuple[int, int]] = {}
        self._next_conn_id = 1
        self._next_xmit = self._next_stable = self._next_expiry = math.inf
        self._budget = PeerBudget()

    # --- lifecycle and public API ------------------------------------------------

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        super().start(local_address, cluster, now)
        self._next_conn_id = random.Random(f"{local_address.uuid}:{now}").randrange(1, 1 << 15)

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        if any(p.name == "UNICAST3" for p in below + above):
            raise PropertyError("UNICAST2 cannot share a stack with UNICAST3, got both")

    def close_connection(self, member: Address, now: float) -> None:
        """Remove both entries for ``member`` at once (JGroups' removeConnection).

        Unacked messages to it are abandoned; the next message opens a new
        connection with a new conn-id. Emits nothing, so tests and tools may
        call it between handlers.
        """
        self._close(member, now)
        self._set_next_expiry()

    def pending(self, member: Address) -> list[Message]:
        """The unacked messages to ``member`` (what closing would abandon), lowest first."""
        entry = self._send.get(member)
        return [] if entry is None else [m for _, m in entry.win.items()]

    def view_changed(self, view: View, now: float) -> None:
        """Close connections to peers that left; members no longer age out."""
        super().view_changed(view, now)
        for peer in [p for p in self._age_out if p in view]:
            del self._age_out[peer]
        for peer in {*self._send, *self._recv} - set(view.members):
            self._close(peer, now)
        self._set_next_expiry()

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, Disconnect):
            for peer in {*self._send, *self._recv}:
                self._close(peer, now)
            self._set_next_expiry()
        super().down_event(event, now)

    # --- sending -----------------------------------------------------------------

    def down(self, batch: list[Message], now: float) -> None:
        for msg in batch:
            dest = msg.dest
            if dest is None or msg.flags & _NO_RELIABILITY:
                continue
            entry = self._send.get(dest)
            if entry is None:
                entry = self._send[dest] = _SendEntry(self._next_conn_id, now)
                self._next_conn_id += 1
                self._opened(dest, now)
            win = entry.win
            seqno = win.hr + 1
            msg.headers[_ID] = Unicast2Header(DATA, seqno, entry.conn_id, seqno == 1)
            win.add(seqno, msg)
            entry.heard = entry.used = now
            self.counters["msgs_sent"] += 1
        self.send_down(batch)

    def _opened(self, peer: Address, now: float) -> None:
        self.counters["connections_opened"] += 1
        if self._next_xmit == math.inf:
            self._next_xmit = now + self.xmit_interval
        view = self.view
        aged = self.max_retransmit_time > 0 and view is not None and peer not in view
        if aged and peer not in self._age_out:
            self._age_out[peer] = now + self.max_retransmit_time
            self._next_expiry = min(self._next_expiry, self._age_out[peer])

    def _control(self, dest: Address, header: Unicast2Header) -> None:
        self.send_down_one(Message(dest, flags=_CONTROL, headers={_ID: header}))

    # --- receiving ---------------------------------------------------------------

    def up(self, batch: list[Message], now: float) -> None:
        out: list[Message] = []
        for msg in batch:
            hdr = msg.headers.get(_ID)
            if hdr is None or msg.dest is None or msg.flags & _NO_RELIABILITY:
                out.append(msg)
                continue
            src = msg.src
            if src is None or not 0 <= hdr.type <= STABLE:
                self.counters["malformed"] += 1
            elif hdr.type == DATA:
                self._on_data(src, hdr, msg, out, now)
            elif hdr.type == XMIT_REQ:
                self._on_xmit_req(src, hdr, now)
            elif hdr.type == SEND_FIRST_SEQNO:
                self._on_send_first_seqno(src, hdr)
            else:
                self._on_stable(src, hdr, now)
        if self._asks:
            self._send_asks(now)
        self.send_up(out)

    def _on_data(
        self, src: Address, hdr: Unicast2Header, msg: Message, out: list[Message], now: float
    ) -> None:
        if hdr.seqno < 1:
            self.counters["malformed"] += 1
            return
        entry = self._recv.get(src)
        if entry is None or entry.conn_id != hdr.conn_id:
            entry = self._connect(src, hdr, now)
            if entry is None:
                return
        win = entry.win
        entry.used = now
        if hdr.seqno - win.hd > self.max_receive_window:
            self.counters["dropped_beyond_window"] += 1  # a sender that never fills its gaps
            return
        if not win.add(hdr.seqno, msg):
            self.counters["duplicates"] += 1
            entry.stable_count = 0
            return
        self.counters["msgs_received"] += 1
        n = len(out)
        if msg.flags & _OOB:
            out.append(msg)
        if win.has_ready():
            out.extend(m for m in win.remove_ready() if not m.flags & _OOB)
        self.counters["msgs_delivered"] += len(out) - n
        entry.bytes += len(msg.payload)
        if entry.bytes >= self.max_bytes:
            entry.bytes = 0
            self._send_stable(src, entry)

    def peer_state(self, peer: Address) -> Peer:
        """What we hold for ``peer`` as a sender (see `RECV_TRANSITIONS`)."""
        if peer in self._recv:
            return Peer.OPEN
        return Peer.CLOSED if peer in self._tombs else Peer.NONE

    def _connect(self, src: Address, hdr: Unicast2Header, now: float) -> _RecvEntry | None:
        """The receive entry for a message on a connection we do not have, or None (dropped)."""
        current = self._recv.get(src)
        tomb = self._tombs.get(src)
        known = current.conn_id if current is not None else tomb.conn_id if tomb else None
        if known is not None and hdr.conn_id < known:
            event = RecvInput.OLDER  # an older connection of the sender: it is gone
        else:
            event = RecvInput.FIRST if hdr.first else RecvInput.NOT_FIRST
        action, _ = RECV_TRANSITIONS[self.peer_state(src), event]
        if action is RecvAction.DROP_STALE:
            self.counters["stale_dropped"] += 1
            return None
        if action is RecvAction.ASK_FIRST:
            self.counters["dropped_no_connection"] += 1
            ask = self._asks.get(src)
            if ask is None or ask[0] != hdr.conn_id or ask[1] < hdr.seqno:
                self._asks[src] = (hdr.conn_id, hdr.seqno)
            return None
        win: SeqnoTable[Message] = SeqnoTable(hdr.seqno - 1)
        if action is RecvAction.REOPEN and tomb is not None:
            del self._tombs[src]
            if tomb.conn_id == hdr.conn_id:  # reopened after our close: skip what we delivered
                win = SeqnoTable(max(hdr.seqno - 1, tomb.hd))
                for seqno, oob in tomb.oob:
                    win.add(seqno, oob)
        entry = self._recv[src] = _RecvEntry(hdr.conn_id, win, now)
        self._asks.pop(src, None)
        self._asked_first.pop(src, None)
        if action is RecvAction.RESET:
            self.counters["connections_reset"] += 1
        else:
            self._opened(src, now)
        if self._next_stable == math.inf:
            self._next_stable = now + self.stable_interval
        return entry

    def _send_asks(self, now: float) -> None:
        for src, (conn_id, seqno) in self._asks.items():
            last = self._asked_first.get(src)
            if last is not None and now - last.time < self.xmit_interval:
                if last.conn_id == conn_id:
                    last.seqno = max(last.seqno, seqno)
                continue
            self._asked_first[src] = _Ask(conn_id, seqno, now)
            if self._next_xmit == math.inf:  # the retransmit task asks again
                self._next_xmit = now + self.xmit_interval
            self._ask_first(src, conn_id, seqno)
        self._asks.clear()

    def _ask_first(self, src: Address, conn_id: int, seqno: int) -> None:
        self._control(src, Unicast2Header(SEND_FIRST_SEQNO, seqno, conn_id))
        self.counters["send_first_seqno_sent"] += 1

    # --- the sender's side of the receiver's requests ------------------------------

    def _entry_for(self, src: Address, conn_id: int) -> _SendEntry | None:
        entry = self._send.get(src)
        if entry is None or entry.conn_id != conn_id:
            self.counters["stale_dropped"] += 1
            return None
        return entry

    def _resend(self, msgs: list[Message]) -> None:
        self.counters["retransmissions"] += len(msgs)
        self.send_down(msgs)

    def _on_xmit_req(self, src: Address, hdr: Unicast2Header, now: float) -> None:
        """Resend what is still in the window, at most ``max_xmits_per_interval``
        seqnos per peer per ``xmit_interval`` (`PeerBudget`)."""
        missing = hdr.missing
        self.counters["xmit_reqs_received"] += len(missing)
        entry = self._entry_for(src, hdr.conn_id)
        if entry is None:
            return
        granted = self._budget.take(
            src, len(missing), self.max_xmits_per_interval, self.xmit_interval, now
        )
        if granted < len(missing):
            self.counters["xmits_capped"] += len(missing) - granted
            missing = missing[:granted]
        found = (entry.win.get(s) for s in missing)
        self._resend([m.copy() for m in found if m is not None])

    def _on_send_first_seqno(self, src: Address, hdr: Unicast2Header) -> None:
        self.counters["send_first_seqno_received"] += 1
        entry = self._entry_for(src, hdr.conn_id)
        low = None if entry is None else entry.win.lowest()
        if entry is None or low is None:
            return
        win = entry.win
        first = win.get(low)
        assert first is not None
        copy = first.copy()
        copy.headers[_ID] = copy.headers[_ID]._replace(first=True)
        rest = (win.get(s) for s in range(low + 1, min(hdr.seqno, win.hr) + 1))
        self._resend([copy, *(m.copy() for m in rest if m is not None)])

    def _on_stable(self, src: Address, hdr: Unicast2Header, now: float) -> None:
        self.counters["stable_received"] += 1
        entry = self._entry_for(src, hdr.conn_id)
        if entry is None:
            return
        win = entry.win
        entry.heard = now
        entry.acked = True
        if hdr.seqno > win.hd:
            win.purge(min(hdr.seqno, win.hr))
        tail = range(max(hdr.high, win.hd) + 1, min(entry.mark, win.hr) + 1)
        entry.mark = win.hr
        found = (win.get(s) for s in tail)
        self._resend([m.copy() for m in found if m is not None])

    # --- timers --------------------------------------------------------------------

    def next_deadline(self) -> float:
        return min(self._next_xmit, self._next_stable, self._next_expiry)

    def tick(self, now: float) -> None:
        if now >= self._next_xmit:
            self._xmit_task(now)
            busy = self._send or self._recv or self._asked_first
            self._next_xmit = now + self.xmit_interval if busy else math.inf
        if now >= self._next_stable:
            for src, entry in self._recv.items():
                self._stable_task(src, entry)
            self._next_stable = now + self.stable_interval if self._recv else math.inf
        if now >= self._next_expiry:
            self._expire(now)

    def property_changed(self, key: str, now: float) -> None:
        if key == "xmit_interval" and self._next_xmit != math.inf:
            self._next_xmit = now + self.xmit_interval
        elif key == "stable_interval" and self._next_stable != math.inf:
            self._next_stable = now + self.stable_interval

    def _xmit_task(self, now: float) -> None:
        """Ask for gaps that persisted for an interval; probe silent senders' tails."""
        for src, entry in self._recv.items():
            missing = entry.win.missing(_MAX_XMIT_REQ)
            if not missing and not entry.last_missing:
                continue
            ask = tuple(s for s in missing if s in entry.last_missing)
            entry.last_missing = frozenset(missing)
            if ask:
                self._control(src, Unicast2Header(XMIT_REQ, conn_id=entry.conn_id, missing=ask))
                self.counters["xmit_reqs_sent"] += len(ask)
        quiet = (self.max_stable_msgs + 1) * self.stable_interval
        for send in self._send.values():
            if len(send.win) and now - send.heard >= (quiet if send.acked else self._unacked_quiet):
                send.heard = now
                self.counters["probes"] += 1
                self._resend(self._probe(send))
        for src, first in list(self._asked_first.items()):
            if now - first.time < self.xmit_interval:
                continue
            if first.tries >= _MAX_FIRST_SEQNO_ASKS:
                del self._asked_first[src]
            else:
                first.time, first.tries = now, first.tries + 1
                self._ask_first(src, first.conn_id, first.seqno)
        if self.conn_expiry_timeout > 0:
            self._reap(now)

    @property
    def _unacked_quiet(self) -> float:
        """Silence after which a connection that no STABLE acknowledged yet is probed: its
        receiver sends the first STABLE within ``stable_interval`` of opening it."""
        return 2 * self.stable_interval

    def _probe(self, send: _SendEntry) -> list[Message]:
        """The highest unacked message; on a connection no STABLE acknowledged yet, the
        lowest too, flagged first (its receiver may never have seen the first message)."""
        win = send.win
        highest = win.get(win.hr)
        assert highest is not None
        if send.acked:
            return [highest.copy()]
        low = win.lowest()
        first = win.get(low) if low is not None else None
        assert first is not None
        copy = first.copy()
        copy.headers[_ID] = copy.headers[_ID]._replace(first=True)
        return [copy] if first is highest else [copy, highest.copy()]

    def _stable_task(self, src: Address, entry: _RecvEntry) -> None:
        key = (entry.win.hd, entry.win.hr)
        if key == entry.last_stable:
            if entry.stable_count >= self.max_stable_msgs:
                return
            entry.stable_count += 1
        else:
            entry.last_stable, entry.stable_count = key, 1
        self._send_stable(src, entry)

    def _send_stable(self, dest: Address, entry: _RecvEntry) -> None:
        win = entry.win
        self._control(dest, Unicast2Header(STABLE, win.hd, entry.conn_id, high=win.hr))
        self.counters["stable_sent"] += 1

    # --- closing ---------------------------------------------------------------------

    def _close(self, peer: Address, now: float) -> None:
        self._close_send(peer)
        self._close_recv(peer, now)
        self._age_out.pop(peer, None)
        self._asked_first.pop(peer, None)

    def _close_send(self, peer: Address) -> None:
        send = self._send.pop(peer, None)
        if send is not None:
            self.counters["abandoned"] += len(send.win)
            self.counters["connections_closed"] += 1

    def _close_recv(self, peer: Address, now: float) -> None:
        action, _ = RECV_TRANSITIONS[self.peer_state(peer), RecvInput.CLOSE]
        if action is RecvAction.BURY:
            recv = self._recv.pop(peer)
            self.counters["connections_closed"] += 1
            win = recv.win
            oob = tuple((s, m) for s, m in win.items() if m.flags & _OOB)
            life = self.max_retransmit_time or math.inf
            self._tombs[peer] = _Tombstone(recv.conn_id, win.hd, oob, now + life)
            while len(self._tombs) > _MAX_TOMBSTONES:
                self._forget(next(iter(self._tombs)))
            self._set_next_expiry()

    def _reap(self, now: float) -> None:
        """Close idle connections: receive ones with no DATA, send ones with nothing unacked."""
        limit = now - self.conn_expiry_timeout
        for peer in [p for p, e in self._recv.items() if e.used <= limit]:
            self._close_recv(peer, now)
            self.counters["reaped"] += 1
        for peer in [p for p, e in self._send.items() if e.used <= limit and not len(e.win)]:
            self._close_send(peer)
            self.counters["reaped"] += 1

    def _expire(self, now: float) -> None:
        for peer in [p for p, t in self._age_out.items() if t <= now]:
            self.counters["aged_out"] += 1
            self._close(peer, now)
        for peer in [p for p, tomb in self._tombs.items() if tomb.expires <= now]:
            self._forget(peer)
        self._set_next_expiry()

    def _forget(self, peer: Address) -> None:
        """A tombstone expires (its time is up, or it is the oldest beyond the cap)."""
        action, _ = RECV_TRANSITIONS[self.peer_state(peer), RecvInput.EXPIRED]
        if action is RecvAction.FORGET:
            del self._tombs[peer]

    def _set_next_expiry(self) -> None:
        times = [*self._age_out.values(), *(t.expires for t in self._tombs.values())]
        self._next_expiry = min(times, default=math.inf)

    # --- observability -----------------------------------------------------------------

    def gauges(self) -> dict[str, Any]:
        """Every connection's conn-id and window (low = hd, high = hr), and the keys every
        reliable protocol shares (`reliable_stats`)."""
        send = {
            str(p): {
                "conn_id": e.conn_id,
                "seqno": e.win.hr,
                "low": e.win.hd,
                "high": e.win.hr,
                "size": len(e.win),
            }
            for p, e in self._send.items()
        }
        recv = {
            str(p): {
                "conn_id": e.conn_id,
                "low": e.win.hd,
                "high": e.win.hr,
                "size": len(e.win),
                "missing": e.win.hr - e.win.hd - len(e.win),
            }
            for p, e in self._recv.items()
        }
        c = self.counters
        return {
            **reliable_stats(
                sent=c["msgs_sent"],
                received=c["msgs_received"],
                delivered=c["msgs_delivered"],
                xmit_reqs_sent=c["xmit_reqs_sent"],
                xmit_reqs_received=c["xmit_reqs_received"],
                retransmitted=c["retransmissions"],
                peer_windows={
                    str(p): (e.win.hd, e.win.hd, e.win.hr) for p, e in self._recv.items()
                },
            ),
            "send_connections": len(send),
            "recv_connections": len(recv),
            "send_window_size": sum(len(e.win) for e in self._send.values()),
            "recv_window_size": sum(len(e.win) for e in self._recv.values()),
            "tombstones": len(self._tombs),
            "age_out": len(self._age_out),
            "send": send,
            "recv": recv,
        }
