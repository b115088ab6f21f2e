"""`listen_in_range`: two members that start together and bind the same TCP port.

Linux lets SO_REUSEADDR sockets that are not listening yet share a port, so the
race is real: both bind, the second listen() fails with EADDRINUSE. The tests
replay it deterministically: a socket class whose listen() lets a competitor
bind and listen on the same port first.
"""

from __future__ import annotations

import errno
import socket

import pytest

from triogroups.transports import _sockets
from triogroups.transports._sockets import listen_in_range

_Socket = socket.socket


def _free_port() -> int:
    with _Socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Race:
    """Patches `socket.socket` so the first ``times`` listen() calls come second."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, times: int) -> None:
        self.competitors: list[socket.socket] = []
        race = self

        class _Racy(_Socket):
            def listen(self, backlog: int = 128, /) -> None:
                if len(race.competitors) < times:
                    rival = _Socket(socket.AF_INET, socket.SOCK_STREAM)
                    rival.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    rival.bind(self.getsockname())  # allowed: neither listens yet
                    rival.listen(8)
                    race.competitors.append(rival)
                super().listen(backlog)

        monkeypatch.setattr(_sockets.socket, "socket", _Racy)

    def close(self) -> None:
        for rival in self.competitors:
            rival.close()


def test_a_port_another_member_listens_on_first_is_skipped_like_a_taken_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = _free_port()
    race = _Race(monkeypatch, times=1)
    try:
        sock = listen_in_range("127.0.0.1", port, 5, 16)
        try:
            bound = sock.getsockname()[1]
            assert race.competitors[0].getsockname()[1] == port
            assert port < bound <= port + 5
            assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        finally:
            sock.close()
    finally:
        race.close()


def test_losing_the_race_on_the_last_port_of_the_range_names_the_whole_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = _free_port()
    race = _Race(monkeypatch, times=1)
    try:
        with pytest.raises(OSError) as caught:
            listen_in_range("127.0.0.1", port, 0, 16)
        assert caught.value.errno == errno.EADDRINUSE
        assert f"no free port on 127.0.0.1 in {port}..{port}" in str(caught.value)
    finally:
        race.close()


def test_without_a_race_the_first_free_port_listens() -> None:
    port = _free_port()
    sock = listen_in_range("127.0.0.1", port, 3, 16)
    try:
        assert sock.getsockname()[1] == port
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR) == 1
    finally:
        sock.close()


def test_port_zero_listens_on_any_port() -> None:
    sock = listen_in_range("127.0.0.1", 0, 0, 16)
    try:
        assert sock.getsockname()[1] > 0
    finally:
        sock.close()
