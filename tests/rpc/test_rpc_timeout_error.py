"""A call that times out raises an error ``except TimeoutError`` catches (issue 40 item 7)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from triogroups import RpcTimeout, SimNetwork, StackConfig, TriogroupsError, open_channel


async def test_an_rpc_timeout_on_the_simulated_network_is_a_timeout_error(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    async with (
        open_channel("c", stack, "A", network=net) as a,
        open_channel("c", stack, "B", network=net) as b,
    ):
        with trio.fail_after(10):
            while len(a.view) != 2:
                await trio.sleep(0.01)

        async def stuck() -> None:
            await trio.sleep_forever()

        b.rpc.register("stuck", stuck)
        with pytest.raises(TimeoutError) as caught:
            await a.rpc.call_one("stuck", to=b.address, timeout=1, oob=True)
        assert isinstance(caught.value, RpcTimeout) and isinstance(caught.value, TriogroupsError)
