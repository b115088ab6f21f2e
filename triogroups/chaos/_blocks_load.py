"""The lock and counter workload of chaos and campaign members, recorded in their histories.

At a seeded rate a member either takes one of a few locks (waiting a bounded time),
holds it a moment and releases it, or increments a counter by one; it records each
grant with its fencing token and the view it arrived in (``lock``), the end of each
hold (``unlock``), each increment as it is called (``add``) and its result with when
it was called and in which view (``count``), so the checker's lock and counter rules
(`triogroups.testing._history_blocks`) judge the run. Both the real chaos member
(`_member`) and the campaign's simulated one (`_campaign_blocks`) run it.

Decisions: a hold ends, for the history, when its release is asked for or when the
member stops holding it (cancelled by a leave or a kill: the record is written before
the task unwinds, and the member's leave or death frees the lock); an operation that
times out or meets a closed channel is not recorded (nothing is known of its result).
The workload never judges anything itself.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable

import trio

from triogroups._errors import ChannelClosed
from triogroups._rpc import RpcTimeout
from triogroups.blocks import CounterService, LockService
from triogroups.testing._history import HistoryWriter
from triogroups.view import View

__all__ = ["LOCKS", "blocks_load"]

#: the locks members contend for (few, so that they do contend), and the counter
LOCKS = ("x", "y")
COUNTER = "n"
_LOCK_SHARE = 0.5  # of the operations, the share that takes a lock
_WAIT = 3.0  # seconds a member waits for a lock before giving up this round
_HOLD = (0.02, 0.3)  # seconds a lock is held


async def blocks_load(
    locks: LockService,
    counters: CounterService,
    history: HistoryWriter,
    rng: random.Random,
    *,
    rate: float,
    view: Callable[[], View],
    caught_up: Callable[[], Awaitable[View]],
    clock: Callable[[], float],
    until: float = float("inf"),
) -> None:
    """Take locks and increment the counter at ``rate`` operations per second (on Trio's
    clock) until ``until``, recording each in ``history``. ``view`` gives the member's
    view now, ``caught_up`` the same once the history recorded it (so a record follows
    its view); ``clock`` is the history's clock."""
    while trio.current_time() < until:
        await trio.sleep(rng.expovariate(rate))
        try:
            if rng.random() < _LOCK_SHARE:
                await _hold(locks, history, rng, view, caught_up)
            else:
                await _count(counters, history, caught_up, clock)
        except (RpcTimeout, ChannelClosed):
            continue


async def _hold(
    locks: LockService,
    history: HistoryWriter,
    rng: random.Random,
    view: Callable[[], View],
    caught_up: Callable[[], Awaitable[View]],
) -> None:
    lock = locks.lock(rng.choice(LOCKS))
    hold = rng.uniform(*_HOLD)
    if not await lock.try_lock(_WAIT):
        return
    token = lock.token
    arrived = view()  # the view the grant arrived in, recorded once the history has it
    try:
        await caught_up()
        history.lock(lock.name, token, arrived, majority=locks.majority)
        await trio.sleep(hold)
    finally:
        history.unlock(lock.name, token, lost=lock.lost)
    await lock.release()


async def _count(
    counters: CounterService,
    history: HistoryWriter,
    caught_up: Callable[[], Awaitable[View]],
    clock: Callable[[], float],
) -> None:
    view = await caught_up()
    since = clock()
    history.add(COUNTER, 1)  # before the call: a call cut short may still have been applied
    value = await counters.counter(COUNTER).add_and_get(1)
    await caught_up()  # the answer's view is the last one recorded before the count
    history.count(COUNTER, value, since, view)
