"""The channel's timeouts renamed (issue 40 item 7): ``connect_timeout`` and ``close_timeout``.

``join_timeout`` and ``leave_timeout`` are also GMS properties, with other meanings (one
JOIN_REQ's wait, one LEAVE_REQ's wait), so the channel's options of those names read as if
they set GMS. The old names work for one more release, with a DeprecationWarning that names
the new one and points at the caller's line.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from triogroups import Channel, JoinFailed, SimNetwork, Stack, StackConfig, open_channel


async def test_open_channel_takes_join_timeout_as_connect_timeout_with_a_warning(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    slow = stack.configure("GMS", join_timeout=5.0)  # discovery alone takes 5 s
    with (
        pytest.warns(
            DeprecationWarning, match="join_timeout is deprecated, use connect_timeout"
        ) as caught,
        pytest.raises(JoinFailed, match="within 1"),
    ):
        async with open_channel("c", slow, "A", network=net, join_timeout=1):
            pass
    assert caught[0].filename == __file__


async def test_open_channel_takes_leave_timeout_as_close_timeout_with_a_warning(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    with pytest.warns(
        DeprecationWarning, match="leave_timeout is deprecated, use close_timeout"
    ) as caught:
        async with open_channel("c", stack, "A", network=net, leave_timeout=7) as ch:
            assert ch._close_timeout == 7
    assert caught[0].filename == __file__


async def test_open_channel_new_names_set_the_timeouts_without_a_warning(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        async with open_channel(
            "c", stack, "A", network=net, connect_timeout=9, close_timeout=7
        ) as ch:
            assert (ch._connect_timeout, ch._close_timeout) == (9, 7)


async def test_open_channel_refuses_an_option_under_both_names(
    autojump_clock: Any, net: SimNetwork, stack: StackConfig
) -> None:
    with pytest.raises(TypeError, match="both leave_timeout and close_timeout"):
        async with open_channel("c", stack, "A", network=net, leave_timeout=7, close_timeout=3):
            pass


def test_channel_takes_the_old_names_with_a_warning_naming_the_new_ones() -> None:
    host = Stack(StackConfig.of("SIM", "PING", "GMS"), "c", "A")
    with pytest.warns(DeprecationWarning, match="Channel\\(\\): leave_timeout .* close_timeout"):
        ch = Channel(host, leave_timeout=0.5)
    assert ch._close_timeout == 0.5
    with pytest.warns(DeprecationWarning, match="join_timeout .* connect_timeout") as caught:
        ch = Channel(host, join_timeout=3)
    assert ch._connect_timeout == 3 and caught[0].filename == __file__
