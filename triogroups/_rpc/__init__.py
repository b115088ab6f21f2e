"""Group RPC (see `_dispatcher`). Import the public names from `triogroups`."""

from triogroups._rpc._dispatcher import RPC_EXC, RPC_REQ, RPC_RSP, Mode, RpcDispatcher, RpcHeader
from triogroups._rpc._errors import NotExecuted, RemoteError, RpcTimeout, UnknownMethod
from triogroups._rpc._rsp import Rsp, RspList

__all__ = [
    "RPC_EXC",
    "RPC_REQ",
    "RPC_RSP",
    "Mode",
    "NotExecuted",
    "RemoteError",
    "RpcDispatcher",
    "RpcHeader",
    "RpcTimeout",
    "Rsp",
    "RspList",
    "UnknownMethod",
]
