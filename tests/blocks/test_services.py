"""The services' set-up: one of each per channel, bad options refused, statistics."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.blocks.conftest import STACK, start
from triogroups import SimNetwork, open_channel, open_counter_service, open_lock_service


async def test_one_service_of_a_kind_per_channel(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        (a,) = await start(nursery, net, "A")
        with pytest.raises(RuntimeError, match="runs a lock service already"):
            async with open_lock_service(a.channel):
                pass
        with pytest.raises(RuntimeError, match="runs a counter service already"):
            async with open_counter_service(a.channel):
                pass
        # the refused ones took none of the running services' requests
        assert await a.locks.lock("x").try_lock(5.0)
        assert await a.counters.counter("n").add_and_get(2) == 2
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"num_backups": -1}, ValueError, "num_backups must be >= 0, got -1"),
        ({"num_backups": 1.5}, TypeError, "num_backups must be an int, got float"),
        ({"timeout": 0}, ValueError, "timeout must be a finite number > 0, got 0"),
        ({"rebuild_timeout": float("inf")}, ValueError, "rebuild_timeout must be a finite"),
        ({"token_gap": 0}, ValueError, r"token_gap must be an int from 1 to 2\*\*31 - 1, got 0"),
        ({"token_gap": 2**31}, ValueError, r"from 1 to 2\*\*31 - 1, got 2147483648"),
    ],
)
async def test_bad_options_are_refused_with_their_name(
    autojump_clock: Any, net: SimNetwork, options: dict[str, Any], error: type, message: str
) -> None:
    async with open_channel("blocks", STACK, "A", network=net, handle_signals=False) as ch:
        with pytest.raises(error, match=message):
            async with open_lock_service(ch, **options):
                pass
        async with open_lock_service(ch) as locks:  # nothing of the refused one is left
            assert await locks.lock("x").try_lock(5.0)


async def test_bad_names_are_refused(autojump_clock: Any, net: SimNetwork) -> None:
    async with trio.open_nursery() as nursery:
        (a,) = await start(nursery, net, "A")
        with pytest.raises(ValueError, match="lock name must be a non-empty str"):
            a.locks.lock("")
        with pytest.raises(ValueError, match="counter name must be a non-empty str"):
            a.counters.counter(3)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout must be >= 0"):
            await a.locks.lock("x").try_lock(-1)
        nursery.cancel_scope.cancel()


async def test_stats_say_who_coordinates_and_what_is_held(
    autojump_clock: Any, net: SimNetwork
) -> None:
    async with trio.open_nursery() as nursery:
        a, b = await start(nursery, net, "AB")
        async with b.locks.lock("x") as lock:
            coord, other = a.locks.stats(), b.locks.stats()
            assert coord["coordinating"] and coord["ready"] and coord["locks_held"] == 1
            assert coord["backups"] == [str(b.channel.address)]
            assert coord["max_token"] == lock.token
            assert not other["coordinating"] and other["held_here"] == ["x"]
        await b.counters.counter("n").set(1)
        assert a.counters.stats()["counters"] == 1
        assert b.counters.stats()["copies"] == 1
        nursery.cancel_scope.cancel()
