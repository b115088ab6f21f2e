"""The `triogroups` command: the demo and the listing commands."""

from __future__ import annotations

import pytest

from triogroups.cli import main


def test_demo_delivers_every_message_despite_loss(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--sim", "--members", "3", "--messages", "60", "--loss", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "every message delivered exactly once" in out
    assert out.count("60/60") == 9


def test_demo_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--loss", "1.5"]) == 2
    assert "0 <= loss < 1" in capsys.readouterr().out


def test_stacks_lists_the_presets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stacks"]) == 0
    out = capsys.readouterr().out
    assert "udp" in out and "tcp" in out and "UDP" in out


def test_protocol_shows_properties_and_unknown_names_an_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["protocol", "UNICAST3"]) == 0
    assert "conn_expiry_timeout" in capsys.readouterr().out
    assert main(["protocol", "NOPE"]) == 2
    assert "unknown protocol 'NOPE'" in capsys.readouterr().out
