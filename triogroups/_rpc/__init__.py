"""Group RPC (see `_dispatcher`). Import the public names from `triogroups`.

The channel builds the two halves it drives, `RpcServer` (running requests,
`_serving`) and `CallTable` (calls in flight, `_calling`), and gives the
application `RpcDispatcher` over them; RPC reaches the channel only through
`ChannelLink` (`_link`).
"""

from triogroups._rpc._calling import CallTable, Mode
from triogroups._rpc._dispatcher import RpcDispatcher
from triogroups._rpc._errors import NotExecuted, RemoteError, RpcTimeout, UnknownMethod
from triogroups._rpc._header import RPC_EXC, RPC_REQ, RPC_RSP, RpcHeader
from triogroups._rpc._link import ChannelLink
from triogroups._rpc._rsp import Rsp, RspList
from triogroups._rpc._serving import Resume, RpcServer

__all__ = [
    "RPC_EXC",
    "RPC_REQ",
    "RPC_RSP",
    "CallTable",
    "ChannelLink",
    "Mode",
    "NotExecuted",
    "RemoteError",
    "Resume",
    "RpcDispatcher",
    "RpcHeader",
    "RpcServer",
    "RpcTimeout",
    "Rsp",
    "RspList",
    "UnknownMethod",
]
