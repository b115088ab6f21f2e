"""One member's answer to a probe: who it is, its view, its stack and every counter.

The answer is a plain dict of str, int, float, bool, None, lists and dicts
(msgpack- and JSON-able), so it crosses the wire as is and the inspector and
``triogroups probe --json`` show it without knowing any protocol. Keys are
only ever added, never renamed: the TUI and scripts read them.

Never raises for a protocol's odd stats value: anything that is not plain
(an `Address`, a tuple, a set, an enum) is turned into its plain form, so a
protocol author cannot break diagnostics by returning a richer snapshot.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from typing import Any, Protocol

import trio

from triogroups.address import Address
from triogroups.protocol import Protocol as Layer

__all__ = ["REPORT_VERSION", "ReportedStack", "build_report", "plain"]

REPORT_VERSION = 1
"""The version of the report's layout; it grows when keys are added."""


class _Counted(Protocol):
    def stats(self) -> dict[str, Any]: ...


class ReportedStack(Protocol):
    """What a report reads of a running stack (`triogroups.stack.Stack` is one): the
    diagnostics sit below the stack host and never import it."""

    @property
    def address(self) -> Address: ...

    @property
    def protocols(self) -> list[Layer]: ...

    @property
    def name(self) -> str: ...

    @property
    def cluster(self) -> str: ...

    @property
    def incarnation(self) -> int: ...

    @property
    def diagnostics(self) -> _Counted | None: ...

    def stats(self) -> dict[str, Any]: ...


def build_report(the_stack: ReportedStack) -> dict[str, Any]:
    """One member's diagnostics answer, as a plain (msgpack/JSON-able) dict.

    ``the_stack`` is a running `Stack` (`triogroups.inspector.build_report` also
    takes a `Channel`). Keys:
    ``address`` (UUID hex), ``name``, ``cluster``, ``pid``, ``time`` (the
    member's wall clock), ``incarnation``, ``view`` (``id``, ``coord``,
    ``members`` and ``member_ids``; None before the first view), ``stack``
    (bottom first: ``protocol`` and ``properties``), ``stats`` (each
    protocol's `Protocol.stats` by protocol name) and ``host`` (``queues``:
    items waiting per layer, and the stack's own counters), ``diag`` (the
    diagnostics' own counters and where they listen; None when off). Raises
    RuntimeError when the stack is not running yet; call it in the stack's trio run.
    """
    address = the_stack.address
    protocols = the_stack.protocols
    names = _unique_names([p.name or type(p).__name__ for p in protocols])
    now = trio.current_time()
    snapshot = the_stack.stats()
    layers = snapshot.pop("layers")
    hosts = [layer["host"] for layer in layers]
    queues = {
        name: sum(int(host.get(k, 0)) for k in _QUEUE_KEYS)
        for name, host in zip(names, hosts, strict=True)
    }
    return {
        "version": REPORT_VERSION,
        "address": f"{address.uuid:032x}",
        "name": the_stack.name or str(address),
        "cluster": the_stack.cluster,
        "pid": os.getpid(),
        "time": time.time(),
        "incarnation": the_stack.incarnation,
        "view": _view(the_stack),
        "stack": [
            {"protocol": name, "properties": plain(p.properties())}
            for name, p in zip(names, protocols, strict=True)
        ],
        "stats": {
            name: _with_blocked_for(plain(layer["stats"]), now)
            for name, layer in zip(names, layers, strict=True)
        },
        "diag": None if the_stack.diagnostics is None else the_stack.diagnostics.stats(),
        "host": {
            "queues": queues,
            "layers": {name: plain(host) for name, host in zip(names, hosts, strict=True)},
            **plain({k: v for k, v in snapshot.items() if k not in _NOT_HOST}),
        },
    }


_QUEUE_KEYS = ("queued_down", "queued_up", "backlog_down", "backlog_up")
_NOT_HOST = frozenset({"cluster", "address"})  # said at the top of the report


def _with_blocked_for(stats: dict[str, Any], now: float) -> dict[str, Any]:
    """A protocol that holds back senders says since when (``blocked_since``, on the
    stack's clock, which a protocol never reads); the report adds for how long."""
    since = stats.get("blocked_since")
    if isinstance(since, int | float):
        stats["blocked_for"] = max(0.0, now - since)
    elif "blocked_since" in stats:
        stats["blocked_for"] = 0.0
    return stats


def _unique_names(names: list[str]) -> list[str]:
    """Protocol names as report keys: a second layer of the same name becomes ``NAME#2``."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _view(stack: ReportedStack) -> dict[str, Any] | None:
    """The installed view as GMS (or, without GMS, the top layer with a view) knows it.

    With GMS, its view only: a member that left has none (the layers below
    still hold the last one, which the inspector took for a split)."""
    gms = next((p for p in stack.protocols if p.name == "GMS"), None)
    view = None if gms is None else gms.view
    for proto in reversed(stack.protocols if gms is None else ()):
        if proto.view is not None:
            view = proto.view
            break
    if view is None:
        return None
    return {
        "id": view.view_id.id,
        "coord": str(view.coord),
        "members": [str(m) for m in view.members],
        "member_ids": [f"{m.uuid:032x}" for m in view.members],
    }


def plain(value: Any) -> Any:
    """``value`` made of plain types only: what msgpack and JSON can carry.

    Mappings get str keys, tuples, sets and other iterables become lists
    (sets sorted), an `Address` its name (or short id), floats that are not
    finite None, and anything else unknown its ``str``.
    """
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)  # an IntEnum or IntFlag as its number
    if isinstance(value, str):
        return str(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {_key(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((plain(v) for v in value), key=str)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, Address):
        return str(value)
    return str(value)


def _key(key: Any) -> str:
    return key if isinstance(key, str) else str(plain(key))
