"""How often a call that usually returns without yielding passes through Trio's scheduler.

Trio's own ``MemorySendChannel.send`` always checkpoints: every call yields to the scheduler,
so a sender in a loop of ``send`` hands each message over alone. The hot paths here
(`Stack.send`, `Channel.send` and its kin, the channel's receive queue) return without yielding
while there is room, so a burst queues up and the layers carry it as one batch. A call that
never yields would starve every other task and could not be cancelled, so every Nth call yields
anyway: N is small enough to keep a loop fair and cancellable, large enough that the batches
stay long.
"""

from __future__ import annotations

__all__ = [
    "QUEUE_CHECKPOINT_AFTER",
    "QUEUE_CHECKPOINT_EVERY",
    "QUEUE_CLOCK_EVERY",
    "SEND_CHECKPOINT_EVERY",
    "Cadence",
    "due",
]

#: Sends (`Stack.send`, `Channel` sends) between forced checkpoints. A loop of channel sends
#: goes down in batches of this many 1 KB messages, about one datagram each: against 32,
#: `bench_channel` spent 3-8% less CPU per delivered message.
SEND_CHECKPOINT_EVERY = 64
#: Messages taken from a channel's receive queue between forced checkpoints. A reader that
#: has fallen behind drains this many per scheduler pass, where a member at full speed gets a
#: few hundred per socket per pass: with 256 the reader could not catch up and the queue stayed
#: full.
QUEUE_CHECKPOINT_EVERY = 1024
#: Seconds after which a reader that keeps finding messages checkpoints anyway, however few it
#: took: a handler that takes 1 ms a message would otherwise hold every other task of its
#: process back for a second. The clock is read once every `QUEUE_CLOCK_EVERY` messages.
QUEUE_CHECKPOINT_AFTER = 0.01
QUEUE_CLOCK_EVERY = 128


def due(count: int, every: int) -> bool:
    """Whether the call numbered ``count`` (counting from 1) must yield: every ``every``th."""
    return not count % every


class Cadence:
    """Counts calls; `tick` says when the current one must yield (see the module docstring)."""

    __slots__ = ("_count", "_every")

    def __init__(self, every: int) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every}")
        self._every = every
        self._count = 0

    def tick(self) -> bool:
        """Count one call; True when it is the ``every``th since the last that yielded."""
        self._count += 1
        return not self._count % self._every
