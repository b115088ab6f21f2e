"""`triogroups probe` output: the tables, the filters and the arguments (issue 16).

The answers are real reports of members on the simulated network; what
`probe` does on the wire is tested in the real-socket tests.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from rich.console import Console

from triogroups.cli import _parser, main
from triogroups.inspector import build_report
from triogroups.inspector._cli import _print_tables, _set_request, filter_answers
from triogroups.testing import open_cluster


async def _answers() -> list[dict[str, Any]]:
    async with open_cluster(2, "udp", cluster="cli") as cluster:
        await cluster[0].send(b"x")
        await cluster.wait_until_delivered()
        return [build_report(m.stack) for m in cluster.members]


async def test_tables_show_members_view_and_each_protocols_counters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers = await _answers()
    console = Console(record=True, width=200)
    _print_tables(console, filter_answers(answers, [], ["nakack2", "GMS"]))
    text = console.export_text()
    assert "members" in text and "A, B" in text
    assert "NAKACK2" in text and "GMS" in text and "UNICAST3" not in text
    delivered = next(line for line in text.splitlines() if " delivered " in line)
    cells = [cell.strip() for cell in delivered.split("│")[2:4]]
    assert all(int(cell) >= 1 for cell in cells), delivered  # the multicast, at both


async def test_filters_keep_the_named_members_and_protocols(
    autojump_clock: trio.testing.MockClock,
) -> None:
    answers = await _answers()
    (b,) = filter_answers(answers, ["B"], [])
    assert b["name"] == "B" and len(b["stats"]) == len(answers[1]["stats"])
    (a,) = filter_answers(answers, [answers[0]["address"][:6]], ["udp"])
    assert a["name"] == "A" and list(a["stats"]) == []  # the sim stack has no UDP layer
    assert filter_answers(answers, ["C"], []) == []


def test_set_takes_protocol_property_and_a_json_or_text_value() -> None:
    assert _set_request("NAKACK2.xmit_interval=250ms") == ("NAKACK2", "xmit_interval", "250ms")
    assert _set_request("DISCARD.up_loss=0.5") == ("DISCARD", "up_loss", 0.5)
    assert _set_request("DISCARD.discard_all=true") == ("DISCARD", "discard_all", True)
    with pytest.raises(ValueError, match=r"PROTOCOL\.PROPERTY=VALUE"):
        _set_request("xmit_interval=1")


def test_bad_arguments_exit_2_without_probing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--set", "nonsense"]) == 2
    assert "--set must be" in capsys.readouterr().err
    assert main(["probe", "--timeout", "0"]) == 2
    assert main(["probe", "--target", "localhost"]) == 2
    assert "--target must be HOST:PORT" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        _parser().parse_args(["probe", "--reset", "--set", "A.b=1"])
