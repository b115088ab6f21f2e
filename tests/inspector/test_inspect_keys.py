"""Keys of the inspector: terminal bytes to key names, and keys to the selection (issue 16)."""

from __future__ import annotations

import os
import termios

import pytest
import trio
from inspect_kit import answers

from triogroups.inspector._keys import parse_keys, raw_keys
from triogroups.inspector._model import step
from triogroups.inspector._select import QUIT, Selection, apply_key
from triogroups.testing import open_cluster


def test_inspect_keys_parse_arrows_controls_and_letters_in_one_read() -> None:
    """A read can hold several keys: escape sequences of both cursor modes, Tab, Ctrl-C."""
    data = b"\x1b[A\x1bOBjq\t\x03\x1b[Z\x1b"
    assert parse_keys(data) == [
        "up",
        "down",
        "j",
        "q",
        "tab",
        "ctrl-c",
        "shift-tab",
        "escape",
    ]


async def test_inspect_keys_move_member_and_protocol_and_quit(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Down/up move between members (clamped at the ends), right/left cycle the layers and
    keep the layer when the member changes; q and Ctrl-C quit, other keys change nothing."""
    async with open_cluster(3, "udp") as cluster:
        display = step(None, answers(cluster.members), trio.current_time())
    a, b, c = (f"{m.address.uuid:032x}" for m in cluster.members)
    start = Selection()
    assert start.resolve(display)[0] == display.members[a]
    assert start.resolve(display)[1] == "SIM"
    moved = apply_key(start, display, "down")
    assert moved == Selection(b, "SIM")
    assert apply_key(Selection(c, "SIM"), display, "down") == Selection(c, "SIM")
    assert apply_key(Selection(a, "SIM"), display, "up") == Selection(a, "SIM")
    assert apply_key(Selection(b, "SIM"), display, "left") == Selection(b, "FRAG")
    assert apply_key(Selection(b, "FRAG"), display, "tab") == Selection(b, "SIM")
    assert apply_key(Selection(b, "NAKACK2"), display, "j") == Selection(c, "NAKACK2")
    assert apply_key(moved, display, "x") == moved
    assert apply_key(moved, display, "q") == QUIT
    assert apply_key(moved, None, "ctrl-c") == QUIT
    gone = Selection("0" * 32, "NOPE")
    assert gone.resolve(display) == (display.members[a], "SIM")


async def test_inspect_keys_raw_mode_reads_single_keys_and_restores_the_terminal() -> None:
    """On a pseudo-terminal: inside `raw_keys` keys arrive one by one without Enter, echo and
    signal keys are off (Ctrl-C is a key); after the block the saved settings are back, also
    when the body fails."""
    leader, follower = os.openpty()
    try:
        saved = termios.tcgetattr(follower)
        with pytest.raises(RuntimeError, match="body failed"):
            async with raw_keys(follower) as keys:
                lflag = termios.tcgetattr(follower)[3]
                assert not lflag & (termios.ICANON | termios.ECHO | termios.ISIG)
                os.write(leader, b"j\x1b[B\x03")
                got = []
                with trio.fail_after(10):
                    async for key in keys:
                        got.append(key)
                        if len(got) == 3:
                            break
                assert got == ["j", "down", "ctrl-c"]
                raise RuntimeError("body failed")
        assert termios.tcgetattr(follower) == saved
    finally:
        os.close(leader)
        os.close(follower)
