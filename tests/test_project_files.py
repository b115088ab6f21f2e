"""The project files beside the code stay true to it (issue 41, item 4).

CONTRIBUTING.md's commands parse and name files that exist, and its table of markers is what
``dev.py test --fast`` leaves out; SECURITY.md's figures are the keyring's and the transports'
constants and defaults; CHANGELOG.md keeps the Keep-a-Changelog shape with an Unreleased entry
for this version.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

import dev
import triogroups
from tests.test_docs import assert_cli_parses
from triogroups import _keyring
from triogroups.transports.base import SECRET_ENV, Transport
from triogroups.transports.tcp import TcpTransport
from triogroups.transports.udp import UdpTransport

ROOT = Path(__file__).resolve().parent.parent
CONTRIBUTING = ROOT / "CONTRIBUTING.md"
SECURITY = ROOT / "SECURITY.md"
CHANGELOG = ROOT / "CHANGELOG.md"

_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_INLINE_COMMAND = re.compile(r"`(triogroups (?![\w-]+:)[^`]*|python3? dev\.py [^`]*)`")


def _commands(path: Path) -> list[str]:
    """Each line of the file's shell blocks, and each command quoted inline."""
    text = path.read_text()
    lines = [
        line
        for match in _FENCE.finditer(text)
        if match.group(1) in ("sh", "bash", "shell", "console")
        for line in match.group(2).splitlines()
    ]
    lines += _INLINE_COMMAND.findall(text)
    return [line for line in dict.fromkeys(lines) if line.strip()]


def _check_command(line: str) -> None:
    """``triogroups`` commands parse with the CLI's own parser, ``dev.py`` commands with
    dev.py's rules, and a script a command runs exists."""
    argv = shlex.split(line, comments=True)
    if argv[0] == "triogroups":
        assert_cli_parses(argv[1:], line)
    elif argv[:2] in (["python3", "dev.py"], ["python", "dev.py"]):
        assert argv[2] in ("test", "demo"), f"`{line}`: dev.py has no command {argv[2]!r}"
        if argv[2] == "test":
            assert "--fast" not in dev.pytest_args(argv[3:]), line
    elif argv[0] in ("python", "python3") and argv[1].endswith(".py"):
        assert (ROOT / argv[1]).is_file(), f"`{line}`: no {argv[1]}"


@pytest.mark.parametrize("path", [CONTRIBUTING, SECURITY], ids=lambda p: p.name)
def test_project_file_commands_parse(path: Path) -> None:
    commands = _commands(path)
    assert commands or path == SECURITY
    for line in commands:
        _check_command(line)


def test_project_file_command_check_can_fail() -> None:
    with pytest.raises(AssertionError, match="does not parse"):
        _check_command("triogroups campaign --preset udp --seeds many")
    with pytest.raises(AssertionError, match=r"no benchmarks/bench_nothing\.py"):
        _check_command("python benchmarks/bench_nothing.py --repeat 3")


def test_contributing_marker_table_is_what_dev_test_fast_leaves_out() -> None:
    """The table of markers in CONTRIBUTING.md, "The quick loop", names exactly the markers
    ``--fast`` deselects."""
    text = CONTRIBUTING.read_text()
    section = text[text.index("### The quick loop") : text.index("## How the suite")]
    rows = re.findall(r"^\| `([\w-]+)` \|", section, re.MULTILINE)
    assert sorted(rows) == sorted(dev.FAST_SKIPS)


def _security() -> str:
    return " ".join(SECURITY.read_text().split())  # lines joined, as the figures may wrap


def test_security_figures_are_the_keyrings_and_transports() -> None:
    """What SECURITY.md says of shared-secret mode and the defaults is what the code does."""
    text = _security()
    assert f"last {_keyring.REPLAY_WINDOW:,} counters" in text
    assert f"at most {_keyring.MAX_STREAMS:,} sender streams" in text
    assert f"{_keyring.NONCE_PREFIX_SIZE} random bytes" in text
    assert f"{_keyring.NONCE_SIZE - _keyring.NONCE_PREFIX_SIZE}-byte counter" in text
    assert f"{_keyring.KEY_ID_SIZE}-byte key id" in text
    with pytest.raises(ValueError, match="at least 16 bytes"):
        _keyring.Keyring("c", b"x" * 15, clock=lambda: 0.0)
    assert "at least 16 bytes" in text
    assert f"`{SECRET_ENV}`" in text
    assert Transport.rollover_time.default == 30.0 and "(30 s by default)" in text
    assert Transport.enable_diagnostics.default is True and "on by default" in text
    assert UdpTransport.bind_addr.default == TcpTransport.bind_addr.default == "127.0.0.1"
    assert UdpTransport.ip_ttl.default == 0 and "TTL 0" in text and "`127.0.0.1`" in text


def test_changelog_has_an_unreleased_entry_for_this_version_by_capability() -> None:
    text = CHANGELOG.read_text()
    assert text.startswith("# Changelog\n")
    versions = re.findall(r"^## \[(.+?)\]", text, re.MULTILINE)
    assert versions[0] == "Unreleased"
    assert f"{triogroups.__version__}, the first release" in text
    sections = re.findall(r"^### (\w[\w ():0-9]*)$", text, re.MULTILINE)
    assert {"Added", "Changed", "Fixed"} <= set(sections)
