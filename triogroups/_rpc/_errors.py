"""RPC errors, and how a remote exception travels and comes back.

A handler's exception goes back as plain data: the type's module and
qualified name, ``str(exc)``, its msgpack-able ``args`` and the formatted
remote traceback. The caller rebuilds the original type when that type is
already imported in the calling process (nothing is imported on a peer's
say-so) and constructible from those args; the rebuilt exception's
``__cause__`` is a `RemoteError` with the member and the remote traceback,
also added as a note so a printed traceback shows it. Otherwise the caller
gets the `RemoteError` itself, as tractor boxes errors it cannot rebuild.
"""

from __future__ import annotations

import sys
from typing import Any

import msgpack

from triogroups._error_root import TriogroupsError
from triogroups._errors import ChannelError
from triogroups.actors._errors import format_traceback
from triogroups.address import Address

__all__ = [
    "NotExecuted",
    "RemoteError",
    "RpcTimeout",
    "UnknownMethod",
    "error_info",
    "rebuild_error",
]


class RemoteError(TriogroupsError):
    """An exception raised by an RPC handler on another member.

    ``type_name`` is the remote type's qualified name (with its module),
    ``message`` its ``str()``, ``traceback`` the remote traceback text and
    ``member`` the member that raised it.
    """

    def __init__(self, type_name: str, message: str, traceback: str, member: Address) -> None:
        super().__init__(f"{type_name}: {message} (raised on {member})")
        self.type_name = type_name
        self.message = message
        self.traceback = traceback
        self.member = member

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.type_name, self.message, self.traceback, self.member)


class RpcTimeout(ChannelError, TimeoutError):
    """No answer from a member within the call's timeout (also a `TimeoutError`)."""


class UnknownMethod(TriogroupsError, LookupError):
    """The member has no RPC method of that name registered."""


class NotExecuted(ChannelError):
    """A joiner got this request's effect with the group's state, so it did not run it."""


def error_info(exc: BaseException) -> dict[str, Any]:
    """What goes on the wire for an exception raised by a handler."""
    args: list[Any] = list(exc.args)
    try:
        msgpack.packb(args, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        args = []
    cls = type(exc)
    return {
        "module": cls.__module__,
        "type": cls.__qualname__,
        "message": str(exc),
        "args": args,
        "traceback": format_traceback(exc),
    }


def _local_type(module: Any, qualname: Any) -> type[Exception] | None:
    """The exception class by that name if it is already imported here; never imports."""
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        if found is None or part.startswith("<"):
            return None
        found = getattr(found, part, None)
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def rebuild_error(info: Any, member: Address) -> Exception:
    """The exception to hand the caller for an error response from ``member``."""
    if not isinstance(info, dict):
        return RemoteError("<unknown>", "malformed error response", "", member)
    module, qualname = info.get("module"), info.get("type")
    message = str(info.get("message", ""))
    traceback = str(info.get("traceback", ""))
    type_name = f"{module}.{qualname}" if module != "builtins" else str(qualname)
    remote = RemoteError(type_name, message, traceback, member)
    cls = _local_type(module, qualname)
    args = info.get("args")
    if cls is None or not isinstance(args, list):
        return remote
    try:
        exc = cls(*args)
    except Exception:
        return remote
    exc.__cause__ = remote
    exc.add_note(f"raised by an rpc handler on {member}; remote traceback:\n{traceback}")
    return exc
