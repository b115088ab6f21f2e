"""The ``triogroups chaos`` command refuses a run it cannot make before starting anything."""

from __future__ import annotations

import pytest

from triogroups.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--members", "2"], "--members must be >= 3, got 2"),
        (["--duration", "5"], "--duration must be >= 10 (seconds), got 5"),
        (["--rate", "0"], "--rate must be > 0, got 0"),
    ],
    ids=["two-members", "five-seconds", "no-rate"],
)
def test_chaos_refuses_too_few_members_too_short_a_run_or_no_traffic(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """One line on stderr naming the argument and its value (issue 38 item 7)."""
    assert main(["chaos", *argv]) == 2
    assert capsys.readouterr().err == f"triogroups chaos: error: {said}\n"
