"""The ``triogroups chaos`` command refuses a run it cannot make before starting anything."""

from __future__ import annotations

import pytest

from triogroups.cli import main


@pytest.mark.parametrize(
    "argv",
    [["--members", "2"], ["--duration", "5"], ["--rate", "0"]],
    ids=["two-members", "five-seconds", "no-rate"],
)
def test_chaos_refuses_too_few_members_too_short_a_run_or_no_traffic(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["chaos", *argv]) == 2
    assert "chaos needs members >= 3" in capsys.readouterr().out
