"""``triogroups inspect``'s arguments (issue 16)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from triogroups.cli import _parser
from triogroups.inspector._demo_inspect import run_demo_inspect
from triogroups.inspector._inspect import run_inspect


@pytest.mark.parametrize(
    ("option", "value"),
    [("--interval", "0"), ("--timeout", "-1"), ("--silent-after", "0"), ("--forget-after", "0")],
)
def test_inspect_cli_refuses_durations_that_are_not_positive(option: str, value: str) -> None:
    """A duration <= 0 is one line naming the option and the value, exit status 2, before
    anything is probed or drawn."""
    args = _parser().parse_args(["inspect", option, value])
    out = io.StringIO()
    assert run_inspect(args, Console(file=out, width=200)) == 2
    assert out.getvalue() == f"error: {option} must be > 0, got {float(value)}\n"


@pytest.mark.parametrize(
    ("option", "value", "rule"),
    [("--port", "0", "a port (1-65535)"), ("--port-range", "-1", ">= 0")],
)
def test_inspect_cli_refuses_bad_diagnostics_ports(option: str, value: str, rule: str) -> None:
    """Where to probe must be a port and a range that is not negative: exit status 2."""
    args = _parser().parse_args(["inspect", option, value])
    out = io.StringIO()
    assert run_inspect(args, Console(file=out, width=200)) == 2
    assert out.getvalue() == f"error: {option} must be {rule}, got {value}\n"


def test_demo_inspect_refuses_the_simulated_demo() -> None:
    """--inspect probes member processes; with --sim there are none: exit status 2 at once."""
    args = _parser().parse_args(["demo", "--sim", "--inspect"])
    out = io.StringIO()
    assert run_demo_inspect(args, Console(file=out, width=200)) == 2
    assert out.getvalue() == (
        "error: --inspect watches member processes: it needs the real demo, not --sim\n"
    )


def test_inspect_cli_names_a_secret_file_it_cannot_read(tmp_path: Path) -> None:
    """--secret-file that does not exist: one line naming it, exit status 2."""
    missing = tmp_path / "nope"
    args = _parser().parse_args(["inspect", "--cluster", "c", "--secret-file", str(missing)])
    out = io.StringIO()
    assert run_inspect(args, Console(file=out, width=200)) == 2
    assert out.getvalue() == f"error: --secret-file {str(missing)!r}: No such file or directory\n"
