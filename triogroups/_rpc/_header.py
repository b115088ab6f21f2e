"""The RPC header and its three message types: what a request or an answer carries.

Registered with the wire codec (`register_header`), which checks it on receipt.
Never imports the dispatcher's parts.
"""

from __future__ import annotations

from typing import NamedTuple

from triogroups.protocols import ids
from triogroups.wire import register_header

__all__ = ["RPC_EXC", "RPC_ID", "RPC_REQ", "RPC_RSP", "RpcHeader"]

RPC_REQ = 1
RPC_RSP = 2
RPC_EXC = 3

#: The header id RPC messages carry (`triogroups.protocols.ids.RPC`).
RPC_ID = ids.RPC


class RpcHeader(NamedTuple):
    """REQ: call ``method`` (``req_id`` 0: no answer wanted). RSP/EXC: the answer to ``req_id``."""

    type: int
    req_id: int = 0
    method: str = ""


register_header(RPC_ID, RpcHeader)
