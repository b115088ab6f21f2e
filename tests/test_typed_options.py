"""The options `open_channel`, `open_sim_network`, `open_cluster` and `GroupActor` pass on are
typed (issue 40 items 5 and 7): a type checker finds a misspelt or mistyped option where the
call is written, instead of the call failing when it runs (they took untyped ``**Any``)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from triogroups import SimNetwork, Stack, open_channel
from triogroups._channel._open import ChannelOptions
from triogroups.stack import StackOptions
from triogroups.transports.sim import NetworkOptions, SimNetworkOptions

ROOT = Path(__file__).resolve().parent.parent

APP = """\
import trio

from triogroups import open_channel, open_sim_network
from triogroups.testing import open_cluster


async def main() -> None:
    async with open_sim_network(seed=1, loss=0.1, name="n") as net:
        async with open_channel("c", "udp", "A", network=net, channel_size=8,
                                restart_window=5.0, connect_timeout=2.0, join_timeout=2.0):
            pass
        async with open_channel("c", "udp", "A", network=net, channel_size="8"):
            pass
        async with open_channel("c", "udp", "A", network=net, chanel_size=8):
            pass
    async with open_sim_network(los=0.1):
        pass
    async with open_cluster(3, seed=2, max_delay=0.01, name="x"):
        pass
    async with open_cluster(3, loss="high"):
        pass


trio.run(main)

from triogroups import GroupActor

GroupActor("c", "udp", "A", connect_timeout=2.0, allow_pickle=True, handle_signals=False)
GroupActor("c", "udp", "A", conect_timeout=2.0)
GroupActor("c", "udp", "A", receive_buffer="big")
"""


def keyword_parameters(function: typing.Callable[..., object]) -> set[str]:
    return {
        name
        for name, p in inspect.signature(function).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


def test_the_option_dicts_name_exactly_the_parameters_they_pass_on() -> None:
    """A new `Stack` or `SimNetwork` option must be added to its TypedDict too."""
    assert set(StackOptions.__annotations__) == keyword_parameters(Stack.__init__)
    assert set(SimNetworkOptions.__annotations__) == keyword_parameters(SimNetwork.__init__)
    assert set(NetworkOptions.__annotations__) == keyword_parameters(SimNetwork.__init__) - {"seed"}


def test_the_group_actors_channel_options_are_open_channels_but_what_it_sets_itself() -> None:
    """`GroupActor` takes ``network`` and ``stack_options`` itself and sets ``state`` (and
    the sink): every other `open_channel` option is a `ChannelOptions` key."""
    opened = keyword_parameters(open_channel)
    assert set(ChannelOptions.__annotations__) == opened - {"network", "state"}


@pytest.mark.slow  # mypy --strict over a script and the package
def test_mypy_finds_a_mistyped_or_misspelt_option_at_the_call(tmp_path: Path) -> None:
    """Checked as an application would be, against this checkout (MYPYPATH comes before
    an installed copy); the good calls, the deprecated ``join_timeout`` included, pass, and
    each bad one is an error on its own line (a `GroupActor`'s misspelt or mistyped channel
    option too: it took ``**Any``)."""
    (tmp_path / "app.py").write_text(APP)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path / "cache"),
         "app.py"],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    # (on MYPYPATH the package is checked as a source: its untyped imports are reported too)
    errors = [
        line
        for line in result.stdout.splitlines()
        if line.startswith("app.py:") and ": error:" in line
    ]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [12, 14, 16, 20, 29, 30], result.stdout + result.stderr
    text = "\n".join(errors)
    assert '"channel_size"' in text and '"chanel_size"' in text, text
    assert '"los"' in text and '"loss"' in text, text
    assert '"conect_timeout"' in text and '"receive_buffer"' in text, text
