"""The process supervisor's plain parts: exit reasons, the escalation error's message, what
an application spec resolves to, and the arguments `open_process_group` refuses."""

from __future__ import annotations

import json
import pickle
import signal

import pytest
import trio

from triogroups import MemberCrashed, ProcessGroupFailed, open_process_group
from triogroups.supervisor._app import AppError, Payload, load_app
from triogroups.supervisor._events import exit_reason
from triogroups.supervisor._logs import json_line


@pytest.mark.parametrize(
    ("returncode", "reason"),
    [
        (0, "exited with status 0"),
        (3, "exited with status 3"),
        (-signal.SIGKILL, "killed by SIGKILL"),
        (-signal.SIGTERM, "killed by SIGTERM"),
    ],
)
def test_exit_reason_reads_like_a_shell(returncode: int, reason: str) -> None:
    assert exit_reason(returncode) == reason


def test_group_failure_names_member_reason_and_last_output_and_pickles() -> None:
    crash = MemberCrashed("B", -9, ["line one", "line two"])
    error = ProcessGroupFailed("g", crash, [], 3, 5.0)
    assert str(error) == (
        "member 'B' killed by SIGKILL: more than max_restarts=3 restarts within 5 s of running "
        "time, group 'g' stopped; last output:\n  | line one\n  | line two"
    )
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.crash.output == ("line one", "line two")


def test_app_specs_resolve_to_functions() -> None:
    """module:function imports the module; file.py:function loads the file."""
    assert load_app("triogroups.cli:main").__name__ == "main"
    assert load_app("tests/supervisor/member_apps.py:views").__name__ == "views"


def test_payload_round_trips_a_local_function_by_value() -> None:
    """A closure (no importable name) travels by value, as a function in __main__ does."""

    async def local(ch: object) -> str:
        return "local"

    payload = Payload.loads(Payload(local, (1, "x"), "udp").dumps())
    assert payload.args == (1, "x") and payload.stack == "udp"
    assert trio.run(payload.function(), None) == "local"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"n": 0}, ValueError, "n must be >= 1, got 0"),
        ({"stack": "nosuch"}, AppError, "unknown stack preset 'nosuch'"),
        ({"stack": "sim"}, AppError, "stack must contain GMS"),
        ({"stop_timeout": 0}, ValueError, "stop_timeout must be > 0, got 0"),
        ({"max_restarts": -1}, ValueError, "max_restarts must be >= 0, got -1"),
        ({"names": ["A", "A"]}, ValueError, "member names must be unique"),
        ({"log_format": "xml"}, ValueError, "log_format must be one of text, json, got 'xml'"),
        (
            {"log_level": "info"},
            ValueError,
            "log_level must be one of DEBUG, INFO, WARNING, ERROR, got 'info'",
        ),
    ],
)
async def test_open_process_group_refuses_bad_arguments_before_starting(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        async with open_process_group("tests/supervisor/member_apps.py:views", **kwargs):  # type: ignore[arg-type]
            pytest.fail("the group must not start")


def test_json_line_keeps_a_member_record_and_wraps_a_plain_line() -> None:
    record = json.dumps({"level": "WARNING", "logger": "app", "message": "m", "time": 1.0})
    assert json.loads(json_line("A", record)) == {
        "member": "A",
        "level": "WARNING",
        "logger": "app",
        "message": "m",
        "time": 1.0,
    }
    wrapped = json.loads(json_line("B", "just text"))
    assert (wrapped["member"], wrapped["level"], wrapped["logger"]) == ("B", "INFO", "stdout")
    assert wrapped["message"] == "just text" and isinstance(wrapped["time"], float)
    assert json.loads(json_line("C", "[1, 2]"))["message"] == "[1, 2]"  # JSON, not a record
