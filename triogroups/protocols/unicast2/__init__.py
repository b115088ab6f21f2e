"""UNICAST2: reliable unicast with negative acks and connection ids (seed 002).

Makes every unicast (``dest`` set, no NO_RELIABILITY flag) reliable and FIFO
per sender; multicasts and NO_RELIABILITY messages pass through. Sans-IO: it
never awaits and reads no clock; ``now`` is passed in.

Each peer has a *send* entry (send conn-id, seqnos from 1, the sent window)
and a *receive* entry (receive conn-id, the receive window). The receiver
drives reliability: it asks for the seqnos it misses (XMIT_REQ) and tells the
sender every ``stable_interval`` how far it got (STABLE), so the sender can
purge. A non-first message on an unknown or other connection is dropped and
answered with SEND_FIRST_SEQNO; the sender then resends its lowest unacked
message flagged ``first``, and the receiver opens a window there. Connection
ids are what keep a reopened connection from mixing with the old one (the
seed's scenarios #4 to #9).

Where the seed leaves a choice open, this module decides:

- Conn-ids come from a per-member counter with a random start (seeded from
  the address and the start time; no clock of our own) and grow by one per
  new connection. Unique between two members is what the seed needs; because
  they also *grow*, a receiver can tell a delayed message of an older
  connection and drops it instead of letting it reset a newer window (the
  seed's "Issues": a retransmitted first message must not trash a window).
- Every DATA header carries the conn-id (the seed's final design, which is
  what fixes scenario #6); XMIT_REQ, SEND_FIRST_SEQNO and STABLE carry it
  too, and a sender ignores any of them for a connection it no longer has.
- SEND_FIRST_SEQNO names the highest seqno dropped; the sender resends
  lowest..that, the lowest marked first (as JGroups). The receiver coalesces
  them per batch and asks a peer at most once per ``xmit_interval``; like a
  gap, an unanswered ask is repeated by the retransmit task (five times at
  most, then the sender's next message or probe starts over).
- XMIT_REQ: the retransmit task (every ``xmit_interval``) asks for seqnos
  that were already missing at its previous run: one request per gap per
  interval, and none for a message that is merely reordered.
- STABLE (hd, hr): ``max_stable_msgs`` bounds repeats of the same (hd, hr)
  (JGroups compares hr only; any progress counts here); a duplicate DATA
  restores the budget, since it shows the sender has not purged. The sender
  purges up to hd (clamped to what it sent) and resends the tail above hr,
  but only messages sent before the previous STABLE: later ones may still
  be in flight, and resending them would cost retransmissions without loss.
- JGroups UNICAST2 can leave a tail unretransmitted and a window unpurged
  when every STABLE for an unchanged (hd, hr) is lost. A sender that has not
  heard a STABLE for ``(max_stable_msgs + 1) * stable_interval`` while it
  holds unacked messages resends its highest one (a probe). On a connection
  that no STABLE acknowledged yet, the receiver may never have seen the first
  message (a receiver that opens a connection sends a STABLE within
  ``stable_interval``): there the probe comes after ``2 * stable_interval``
  and resends the lowest unacked message flagged first with the highest, so
  the receiver opens the window without a SEND_FIRST_SEQNO round trip
  (campaign unicast2 seed 2275: first unicasts lost in a partition, the
  SEND_FIRST_SEQNO round trip lost twice on a lossy link before the next one).
- Closing (a view without the peer, `close_connection`, age-out, Disconnect)
  removes both entries at once. Closing the send side abandons its unacked
  messages, as the seed says (cancel pending retransmissions; counted in
  ``abandoned``). Closing the receive side keeps a tombstone (conn-id,
  highest delivered, OOB messages delivered above it) for
  ``max_retransmit_time``: if the same connection comes back after
  SEND_FIRST_SEQNO (scenarios #5, #9) the new window starts past what was
  delivered, so nothing is delivered twice.
- Idle connections (JGroups' ``conn_expiry_timeout``): a receive entry
  that got no DATA for that long is closed (with its tombstone); a send
  entry only once nothing is unacked, so reaping never abandons a message.
  This is also what frees a receive window stuck behind a gap that its
  sender abandoned by closing.
- Age-out: a connection to a peer that is not in the installed view is
  closed ``max_retransmit_time`` after it was opened (JGroups' AgeOutCache,
  not refreshed by traffic). Before any view is installed nobody is a
  non-member, so nothing ages out.
- A unicast to itself takes the same path (the transport loops it back).
- Limits against abuse (issue 18, beyond JGroups, as in UNICAST3): a
  receive window keeps at most ``max_receive_window`` seqnos ahead of the
  next one to deliver (``dropped_beyond_window``), so a sender that never
  fills its gaps cannot make us buffer without end; a peer's XMIT_REQs are
  served for at most ``max_xmits_per_interval`` seqnos per ``xmit_interval``
  (``xmits_capped``).
"""

from triogroups.protocols.unicast2._protocol import Unicast2
from triogroups.protocols.unicast2._state import (
    DATA,
    SEND_FIRST_SEQNO,
    STABLE,
    XMIT_REQ,
    Unicast2Header,
)

__all__ = ["DATA", "SEND_FIRST_SEQNO", "STABLE", "XMIT_REQ", "Unicast2", "Unicast2Header"]
