"""``triogroups inspect``'s arguments (issue 16)."""

from __future__ import annotations

from pathlib import Path

import pytest

from triogroups.cli import main


@pytest.mark.parametrize(
    ("option", "value"),
    [("--interval", "0"), ("--timeout", "-1"), ("--silent-after", "0"), ("--forget-after", "0")],
)
def test_inspect_cli_refuses_durations_that_are_not_positive(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A duration <= 0 is one line on stderr naming the option and the value, exit status 2,
    before anything is probed or drawn."""
    assert main(["inspect", option, value]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == f"triogroups inspect: error: {option} must be > 0, got {float(value)}\n"


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [("--port", "0", "a port (1-65535)"), ("--port-range", "-1", ">= 0")],
)
def test_inspect_cli_refuses_bad_diagnostics_ports(
    option: str, value: str, rule: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where to probe must be a port and a range that is not negative: exit status 2."""
    assert main(["inspect", option, value]) == 2
    said = capsys.readouterr()
    assert said.out == ""
    assert said.err == f"triogroups inspect: error: {option} must be {rule}, got {value}\n"


def test_demo_inspect_refuses_the_simulated_demo(capsys: pytest.CaptureFixture[str]) -> None:
    """--inspect probes member processes; with --sim there are none: exit status 2 at once,
    the reason on stderr."""
    assert main(["demo", "--sim", "--inspect"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "triogroups demo: error: --inspect watches member processes: it needs the real demo, "
        "not --sim\n"
    )


def test_inspect_cli_names_a_secret_file_it_cannot_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--secret-file that does not exist: one line on stderr naming it, exit status 2."""
    missing = tmp_path / "nope"
    assert main(["inspect", "--cluster", "c", "--secret-file", str(missing)]) == 2
    assert capsys.readouterr().err == (
        f"triogroups inspect: error: --secret-file {str(missing)!r}: No such file or directory\n"
    )
