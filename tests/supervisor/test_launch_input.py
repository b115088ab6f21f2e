"""``triogroups launch`` refuses bad input before it starts anything: one line naming the
problem, exit status 2, no process started."""

from __future__ import annotations

import os

import pytest
from supervisor_kit import APPS, children_of

from triogroups.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no.such:module"], "cannot import app module 'no.such' (no.such:module): "),
        (["tests/supervisor/no_such_file.py:app"], "app file 'tests/supervisor/no_such_file.py'"),
        (["--stack", "nosuch", f"{APPS}:views"], "unknown stack preset 'nosuch'"),
        (["--stack", "nowhere.toml", f"{APPS}:views"], "stack file 'nowhere.toml' does not exist"),
        (["-n", "0", f"{APPS}:views"], "-n must be >= 1, got 0"),
        ([f"{APPS}:no_such_function"], "has no function 'no_such_function'"),
        (["just_a_module"], "app must be module:function or file.py:function"),
    ],
)
def test_bad_input_is_one_line_and_exit_status_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = children_of(os.getpid())
    assert main(["launch", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("triogroups launch: error: ") and err.count("\n") == 1, err
    assert message in err
    assert children_of(os.getpid()) == before
