"""The largest UDP datagram is one constant, `triogroups.wire.MAX_DATAGRAM` (issue 40 item 8):
it was written out in seven places, which could drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import triogroups
from triogroups.properties import PropertyError
from triogroups.transports import SimTransport, UdpTransport
from triogroups.wire import MAX_DATAGRAM, WireCodec

_PACKAGE = Path(triogroups.__file__).parent


def test_datagram_limit_is_written_once_in_the_package() -> None:
    """Only wire.py spells out 65,507; every other module names `MAX_DATAGRAM`."""
    spelled = re.compile(r"\b65_?507\b")
    places = sorted(
        str(path.relative_to(_PACKAGE))
        for path in _PACKAGE.rglob("*.py")
        if spelled.search(path.read_text(encoding="utf-8"))
    )
    assert places == ["wire.py"]


def test_datagram_limit_bounds_udp_and_is_the_codec_and_sim_default() -> None:
    """UDP's ``max_bundle_size`` may reach the limit and not pass it; a codec and the
    simulated transport default to it."""
    assert MAX_DATAGRAM == 65_535 - 20 - 8
    assert UdpTransport(max_bundle_size=MAX_DATAGRAM).max_bundle_size == MAX_DATAGRAM
    with pytest.raises(PropertyError, match=f"in 64..{MAX_DATAGRAM}"):
        UdpTransport(max_bundle_size=MAX_DATAGRAM + 1)
    assert WireCodec("c").max_size == MAX_DATAGRAM
    assert SimTransport().max_bundle_size == MAX_DATAGRAM
