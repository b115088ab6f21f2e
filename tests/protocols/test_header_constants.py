"""Test-kit gap (issue 12): each protocol's header message types are public, beside the header.

A test that builds or inspects a protocol's messages imports the type constants from the
protocol's public module (``from triogroups.protocols.unicast3 import Unicast3Header, DATA``),
never from a private module.
"""

from __future__ import annotations

import importlib

import pytest

from triogroups.wire import header_type

EXPORTED = {
    "triogroups.protocols.unicast3": ("Unicast3Header", "DATA ACK SEND_FIRST_SEQNO XMIT_REQ CLOSE"),
    "triogroups.protocols.unicast2": ("Unicast2Header", "DATA XMIT_REQ SEND_FIRST_SEQNO STABLE"),
    "triogroups.protocols.nakack2": (
        "NakAckHeader2",
        "MSG XMIT_REQ XMIT_RSP HIGHEST_SEQNO VIEW_SEQNO",
    ),
    "triogroups.protocols.mcast": ("McastHeader", "MSG XMIT_REQ XMIT_RSP ACK PURGED"),
    "triogroups.protocols.gms": (
        "GmsHeader",
        "JOIN_REQ JOIN_RSP LEAVE_REQ LEAVE_RSP VIEW VIEW_ACK MERGE_REQ MERGE_RSP "
        "INSTALL_MERGE_VIEW CANCEL_MERGE",
    ),
    "triogroups.protocols.stable": ("StableHeader", "STABLE_GOSSIP STABILITY"),
    "triogroups.protocols.merge3": ("Merge3Header", "INFO"),
    "triogroups.protocols.verify_suspect": ("VerifyHeader", "ARE_YOU_DEAD I_AM_NOT_DEAD"),
    "triogroups.protocols.ping": ("DiscoveryHeader", "REQUEST RESPONSE"),
    "triogroups.protocols.tcpping": ("DiscoveryHeader", "REQUEST RESPONSE"),
    "triogroups.protocols.ufc": ("FcHeader", "REPLENISH CREDIT_REQUEST"),
    "triogroups.protocols.mfc": ("FcHeader", "REPLENISH CREDIT_REQUEST"),
}


@pytest.mark.parametrize("module_name", sorted(EXPORTED))
def test_header_type_constants_are_exported_with_the_header(module_name: str) -> None:
    module = importlib.import_module(module_name)
    header, constants = EXPORTED[module_name]
    names = constants.split()
    missing = [name for name in [header, *names] if name not in module.__all__]
    assert missing == [], f"{module_name}.__all__ lacks {missing}"
    values = [getattr(module, name) for name in names]
    assert all(type(v) is int for v in values)
    assert len(set(values)) == len(values), "message types must be distinct"
    cls = getattr(module, header)
    assert any(header_type(pid) is cls for pid in range(1, 100)), "header is registered"
