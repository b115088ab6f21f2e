"""Member histories: what each member incarnation sent, delivered and installed, and a checker.

A member records its history with a `HistoryWriter`, one JSON-lines file per
incarnation (a restarted member is a new incarnation with a new address, so a
new file). Every record is one line, written with one ``write`` of a
line-buffered file, so a member killed with SIGKILL loses nothing it recorded.
`check_histories` reads the files of a run afterwards and returns every
violation of the rules below, each with the smallest excerpt of the histories
that shows it (`HistoryViolation`); `assert_histories` raises on the first.
It belongs to the test kit, beside the contract checker it extends across views:
it judges a finished run offline from files, where the inspector is for live
diagnostics of running members.

Record format (one JSON object per line, ``t`` = seconds on a clock every file of
the run shares: wall time for processes on one host, virtual time in a simulation):

=========  ====================================================================
``k``      fields
=========  ====================================================================
start      ``member`` (UUID, 32 hex digits), ``name``; the file's first line.
           A file whose start has ``"member": null`` is the run's fault log;
           ``traffic`` (false for a member that only calls the lock and
           counter services; absent otherwise)
send       ``id`` (the message's identity: unique among this incarnation's
           sends), ``to`` (UUID or null for a multicast), ``oob`` (bool),
           ``loopback`` (false for a DONT_LOOPBACK multicast; absent otherwise),
           ``total`` (true for a multicast in the total order: every regular
           multicast of a stack with SEQUENCER; absent otherwise)
deliver    ``from`` (sender's UUID), ``id`` (the sender's id for the message)
view       ``id`` ([counter, coordinator UUID]), ``members`` (UUIDs, in order),
           ``merge`` (true for a merge view; absent otherwise)
sample     ``rss`` (bytes), ``windows`` ({protocol: messages held})
fault      ``kind`` (``partition``, ``heal``, ``kill``, ...), ``detail``
leave      ``flushed`` (bool): the member left gracefully (after its disconnect
           returned), and whether the leave promised its multicasts had
           reached the others (a None or False return: no promise)
unsent     ``id``: the send recorded as ``id`` was cancelled before the stack
           took it (a send waiting for room in a full window), or its member
           was killed while MCAST still parked it for room (`Mcast.parked`):
           nothing was sent, so the checker forgets that send
taken      ``id``: the stack took the send recorded as ``id`` only now (it
           waited while a layer held senders back: a full window, no
           flow-control credits); absent for a send taken at once
lock       ``name``, ``token``, ``view`` (the view id the member had when the
           grant arrived), ``majority`` (true in majority mode; absent
           otherwise): a grant of a lock of the lock service
unlock     ``name``, ``token``, ``lost`` (bool: the service had said the
           lock was taken from it): that hold ends (its release is asked
           for, or the member stops holding it: cancelled, closing)
add        ``name``, ``delta``: an ``add_and_get`` of ``delta`` on a counter
           is called now (written before it goes out; answered or not)
count      ``name``, ``value``, ``since`` (when it was called), ``view`` (the
           view id at the call): an ``add_and_get`` of a positive delta on
           a counter of the counter service returned ``value``
=========  ====================================================================

What the checker proves (the delivery contract without FLUSH):

- **fifo / duplicate / unknown**: per sender incarnation and receiver, regular
  multicasts are delivered in send order, and so are regular unicasts; no
  message (OOB included) is delivered twice; nothing is delivered that its
  sender did not record sending (to that receiver or the group).
- **missing**: a regular message sent while its sender had view V reaches every
  member R of V that installed V and moved on with the sender: the next view
  each of them installed after V is the same view and contains both (or
  neither installed another view). It must be delivered provided the sender
  and R stayed together (installed the same views, each view containing both,
  both histories going on) for at least ``settle`` seconds after the send,
  counting only the seconds in which the fault log let them reach each other
  both ways (no partition or one-way split between them, neither paused nor
  leaving since its leave or restart step: `Outages`); failure detection lags
  behind pauses and one-way splits, so a view can keep two members together
  that cannot talk (campaign unicast2 seed 2190: G could not hear D for all but
  0.07 s of the 11.3 s after D's send that their views held both).
  The ``settle`` seconds run from when the send entered the group: when the
  stack took it (its ``taken`` record, else the send) or, for a regular
  multicast outside the total order, when its sender delivered it itself, if
  that came later (a sender delivers its own multicast when the reliability
  layer numbers and sends it; MCAST keeps the first sends after its window
  filled until there is room). While flow control holds senders back, waiting
  for acks or credits from a member that crashed or is cut off and not yet
  excluded, no layer below has the message to deliver or retransmit (campaign
  udp-mcast seed 21144: D's multicast waited 7.4 s at the top of the stack
  behind an MCAST window a killed member kept full, then 7.3 s more behind a
  partitioned one; E left gracefully 7.3 s after the stack took it; seed
  60185: I1-32 waited 19 s in I's full window).
  That is what JGroups guarantees without FLUSH: there is no promise for a
  member that leaves, is suspected, or is split from the sender before
  retransmission completes, nor that delivery happens before the next view is
  installed; a multicast counts for the sender itself too (loopback), unless
  it was sent DONT_LOOPBACK. A totally ordered multicast (``total``) comes back
  to its sender through the coordinator's order, as to everyone: it is owed to
  the sender only when it is owed to another member of V (or the sender is
  alone in V), so a sender cut off from the coordinator, whose own view kept
  members the coordinator's view had left it out from, is not owed its own
  (campaign udp-total 92 and 178). And since it reaches every member only
  through the coordinator of the member's view (or that one's heir, once it
  crashed or left), the ``settle`` seconds count only while sender, coordinator
  and receiver could all talk (campaign udp-total-blocks seed 70074: the
  coordinator of view 7 could not hear the sender, then was paused).
- **flushed_leave**: a regular multicast sent by a member that then left
  gracefully with ``flushed`` true reaches every member R of the sender's last
  view (the one it had when it left) that installed every view the sender
  installed from the send to its leave, none of R's views between them
  leaving the sender out (one split off and merged back in between was owed
  nothing sent before the split: a merge digest starts its window afresh) and
  stayed: the next view R installed after that last view lacks the sender,
  and R's history goes on for ``settle`` seconds after it. A flushed leave
  promises that what the member sent got through before it went, so its
  leaving is no excuse (**missing** does not ask this: the sender left).
  A view without the sender that R left, before the sender left, for one
  holding it again was R splitting off, not the leave: R was merged back in a
  view the sender may never have installed, its window for the sender started
  afresh at the merge digest, and R is owed only what the sender sent from
  that view on; the view without the sender that R went on in is then the
  next one after it (campaign udp-mcast seed 50545: E, cut off, installed a
  singleton view, was merged back with F, which stayed in the view it had
  had with E, and F left flushed from it).
- **view_order**: two members that installed the same view V and each kept the
  other in the next view it installed, installed the same next view, or the one
  that lacks the other's next view W installed, within ``settle`` seconds of W,
  a view at least as new (or its history ended): no FLUSH, so a view does not
  reach a member its coordinator cannot reach (the coordinator crashed or was
  paused, a partition, a merge view overtaken by the next view), and the next
  view supersedes it; what is promised is that nobody stays behind (two
  coordinators can install the same counter at once, as a merge and a view
  change in one subgroup can; MERGE3 then merges the two). A member that missed W
  is also excused when a view after W, within ``settle`` seconds of it, removed
  it (it was unreachable) and it installed one at least as new within ``settle``
  seconds of that or of a ``heal`` fault after it (it was merged back once the
  network let it). That removing view is one installed by any member that
  installed W, not only by the other member of the pair: that one may have left
  or crashed before it (campaign udp-mcast seed 2200: a partition kept B's view 3
  from D; A, which had it, left 0.4 s before B's view 4 removed D, and the merge
  view took D back 3.1 s after the heal). When W's coordinator crashed or left
  within ``settle`` seconds of W, the ``settle`` seconds run from then: only
  failure detection tells the others it is gone. Those ``settle`` seconds count,
  as for **missing**, only while the fault log let the pair reach each other both
  ways (`Outages`): while they cannot talk, no view of theirs can reach the one
  that missed W (campaign udp-mcast seed 10357: a one-way split kept A's view 8
  from G; 0.06 s after it ended D, G's next coordinator on its side of a
  partition, was paused until the quiet heal, and D's view 9 reached G 5 s later,
  10.1 s after A went). Nor do the seconds in which the coordinator of the view
  the other member had then could not talk with the one that missed W (while
  both their histories go on): views and merges come from coordinators
  (campaign udp-mcast seed 61399: F, coordinator of the merge view that kept C
  as a member though C never had its subgroup's view, heard nobody, then not C,
  then was paused). Once that coordinator crashed or left, the same holds for
  its heir, the next member of that view whose history goes on (campaign
  udp-total seed 70033: B was killed 0.24 s after its view 8, which loss kept
  from D, and E, B's heir, was paused for 5.2 of the 10.8 s until its own view
  took D on).
- **total_order**: two incarnations deliver the totally ordered multicasts
  (``total`` sends) they both delivered in the same relative order, counting
  for each pair only the deliveries made while each had a view of one stretch
  of views they went through together: consecutive views both installed, one
  after the other at both, each view holding both. A delivery counts in the
  view its receiver had last installed when it delivered. A stretch ends
  where their next views differ, or where one view leaves one of them out
  (split off, then merged back: a merge does not reconcile the orders the two
  sides delivered apart, and the merged view orders from then on; a stretch
  may begin at the merge view). Where the view after the stretch of one of them
  leaves the other out, the other's deliveries count only until that view was
  installed: later it delivered split off, in a view the rest had left (campaign
  tcp-total-blocks seed 70046: D, paused through the coordinator's change and
  removed, delivered at its resume the order of B, the old coordinator, paused
  and excluded too); if the two could not reach each other (the fault log's
  outages) from some time until that view, only until then: the split began
  there and the view noticed it (udp-total-blocks seed 507: D, its subgroup's
  coordinator, ordered and delivered a message in its old view as a one-way
  split began that kept everyone from hearing it, until the view that removed
  it). Where the other's history ends in the stretch's last view (it left), the
  next views of those that went on from it decide, if all leave the member
  out. Compared are the messages sent in a view both
  installed (a joiner is owed nothing sent before its first view, nor its
  place in the order: a new coordinator's tail hand-over can bring it such a
  message late). A message only one of them delivered in the stretch is not
  compared (**missing** asks whether it was owed); a message delivered twice
  is a **duplicate** and counts at its first delivery here.
  SEQUENCER's guarantee (docs/design/total-order.md): members that install
  the same views deliver one identical sequence of the ordered multicasts.
- **view_id**: each incarnation's view ids strictly increase; **view_members**:
  one view id names one membership, whoever installed it.
- **memory**: no sample above ``max_rss`` bytes or ``max_window`` messages held.
- **no_traffic_after_heal**: after each ``heal`` fault, every member whose
  history goes on for ``resume_within`` seconds delivers, within that time, a
  message another member sent after the heal (not one with ``traffic`` false).
  Excused are a member that a later fault cuts off (a split it is on either side
  of), pauses, kills, restarts or makes leave within that time, and every member
  when no other one sent anything in it: the contract merges members that
  disagree "within a few MERGE3 rounds" of reaching each other, and owes a
  message only to members that could receive it (chaos udp-mcast seed 5005: the
  real runner records every split's end as a heal; E, a singleton, was made deaf
  again 8.6 s after one and, the other members killed and awaiting their
  restart, was alone until its own kill 23.6 s after it). A member that never
  resumes is still caught at the quiet period's heal, which no fault follows
  (the campaign and the real runner record it).
- **lock_owners**, **lock_token**, **lock_minority**, **counter_unique**,
  **counter_order**, **counter_lost**, **counter_doubled**: the lock and
  counter services' rules on the ``lock``, ``unlock``, ``add`` and ``count``
  records (`_history_blocks`, with the rules themselves in `_block_rules`): one
  owner of a lock at a time in a view, fencing tokens that grow along a line of
  views, no grant in majority mode in a view without a majority, increments
  that each return their own value, in the order they were made, also across
  the coordinator's crash, and no value above what the calls made so far add
  up to (no add applied twice; judged only in runs that record ``add``).

The writer and the reader live in `_history_records`, the checker in
`_history_check` (over the histories as `_history_index` indexes them; the
**total_order** rule in `_history_total_order`, the lock and counter rules in
`_history_blocks`); this module gathers them (the test kit and the chaos tools
import from here).
"""

from triogroups.testing._history_check import (
    HistoryError,
    HistoryViolation,
    assert_histories,
    check_histories,
)
from triogroups.testing._history_records import History, HistoryWriter, Line, read_histories

__all__ = [
    "History",
    "HistoryError",
    "HistoryViolation",
    "HistoryWriter",
    "Line",
    "assert_histories",
    "check_histories",
    "read_histories",
]
