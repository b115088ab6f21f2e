"""Hosting one sans-IO protocol as an actor: the layers of a stack and their transport.

A layer actor runs three tasks that share the protocol object: the down loop
(batches and events from the layer above), the up loop (from the layer
below) and the timer loop (calls `Protocol.tick` at `next_deadline`). Trio
runs one task at a time and handlers never await, so the protocol needs no
locks. After every handler the protocol's outboxes go into one `_Outbox` per
direction, so what a protocol emits leaves in the order it was emitted.

Run to completion through idle layers: a neighbour reaches a layer through
that direction's `Inlet`, which calls the layer's handler at once, in the
neighbour's task, when the layer is *ready* for it: it is running, not
already inside a handler (its own, or one reached inline further up the
call chain: a handler that emits both ways cannot re-enter itself), nothing
waits in its inbox for that direction (counted from the moment an item is
put in until the loop hands it to the protocol, so an item taken but not yet
handled counts too), and its outboxes are as free as its own loop would
want them after a handler (nothing waiting in the same direction, at most
_MAX_CROSS_BACKLOG in the other). Otherwise the item goes into the inbox
channel and the layer's loop takes it, as before: whatever waits there is
handled first, so order per direction, back-pressure (a bounded channel
still blocks a producer once a layer is busy) and fairness hold. An item
from a transport's receive loop climbs every idle layer to the top in one
task; a batch from the top (`Stack.send`, whose channel is the send queue
the top layer drains whole) goes down the same way from the top layer's
task. A handler that raises inline crashes its own layer: the error is
handed to that layer's actor, which raises it, so the supervisor sees the
same crash report with that layer's name; the neighbour carries on. Timers
stay with the layer's own timer task. Handlers run in one synchronous chain
are given the same ``now`` (no time passes for a task that never awaits).

Items are forwarded with ``send_nowait``: a batch can cross several layers in
one scheduler pass. When a neighbour is full, the loop that fed the handler
waits only for its own direction (back-pressure, never loss); what it emitted
the other way (an ack going down while handling an up batch) waits in that
direction's outbox without holding the loop up. Awaiting the other direction
would close a cycle across members: over TCP, A's writes wait for B to read,
B's reader waits for B's up loop, which would wait for B's writes, which wait
for A to read.

The package: `_ways` (the `Inlet` into a layer and the `Outbox` out of it,
and the one readiness check), `_actor` (`LayerActor`), `_transport`
(`TransportActor`, `StartupError`).
"""

from triogroups._layer._actor import LayerActor, original_error
from triogroups._layer._transport import StartupError, TransportActor
from triogroups._layer._ways import MAX_QUEUED_MESSAGES, Inlet, after_chain

__all__ = [
    "MAX_QUEUED_MESSAGES",
    "Inlet",
    "LayerActor",
    "StartupError",
    "TransportActor",
    "after_chain",
    "original_error",
]
