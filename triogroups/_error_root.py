"""`TriogroupsError`: the one base class of every error the package raises.

An application that wants to tell "triogroups failed" from its own bugs
catches this one class. Each concrete error also keeps the built-in base its
meaning calls for (`PropertyError` is a `ValueError`, `RpcTimeout` a
`TimeoutError`, `ActorGone` a `RuntimeError`), so code catching the built-in
keeps working. Two kinds stay outside on purpose: `SignalExit` and
`Interrupted` are a `SystemExit` (they end the process and must not be
caught by ``except Exception``), and the test kit's failed checks
(`ContractViolation`, `Livelock`, `HistoryError`) are `AssertionError`s,
so a test's ``except TriogroupsError`` never swallows a failed assertion.

The bottom of the layers: it imports nothing from triogroups.
"""

from __future__ import annotations

__all__ = ["TriogroupsError"]


class TriogroupsError(Exception):
    """Base class of the errors triogroups raises (channel, RPC, actors, supervisor, codec)."""
