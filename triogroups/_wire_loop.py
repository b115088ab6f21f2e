# cython: annotation_typing=False
# (the header above: Cython types this module from _wire_loop.pxd alone, not its annotations)
"""The wire codec's per-message loops: a bundle's messages to entries, and entries to messages.

This is the codec's work that runs once per message (the prefix, msgpack and sealing run
once per bundle, in `triogroups.wire`). It is plain Python and the reference; the build
compiles this same file with Cython (typed by ``_wire_loop.pxd`` beside it) when a C
compiler is there, and `triogroups._compiled` picks which form runs. The Python must stay
valid Cython in pure-Python mode: no generated code, no tricks the typed form makes pointless.

`encode_entries` reads four slots of each `Message`. The interpreter reads a slot from its
inline cache, and compiled code reading an untyped object's attribute (``PyObject_GetAttr``)
measured slower than that (benchmarks/HISTORY.md, issue 43), so ``_wire_loop.pxd`` cimports
`Message`'s layout (its five slots, in the order CPython stores them: ``_message_layout.pxd``)
and the compiled loop reads them from the object directly. Decoding still sets the slots of
each new message by attribute: a new object's slots are empty, which the compiled form's
direct stores assume they are not.

`decode_messages` checks every field of every entry and raises `WireError` (and nothing
else) for anything that is not a valid message: its header maps are converted in place by
the registered converters (`triogroups._wire_headers`) and become the messages' ``headers``.
"""

from __future__ import annotations

from typing import Any

from triogroups._wire_headers import (
    _BAD_ENTRY,
    _BAD_FLAGS,
    _CONVERTERS,
    _HEADERS,
    _INT_HEADERS,
    WireError,
)
from triogroups.address import Address
from triogroups.message import Message

__all__ = ["decode_messages", "encode_entries"]

_new = object.__new__


def encode_entries(messages: list[Message], src: Address) -> list[tuple[Any, ...]]:
    """The bundle entry of each message: ``(flags, headers | None, payload)``, with the
    message's source as a fourth item when it is not the bundle's ``src`` (a message
    with no source is the bundle's)."""
    entries: list[tuple[Any, ...]] = []
    for m in messages:
        msrc = m.src
        if msrc is src or msrc is None or msrc == src:  # identity first: no __eq__ call
            entries.append((m.flags, m.headers or None, m.payload))
        else:
            entries.append((m.flags, m.headers or None, m.payload, msrc))
    return entries


def decode_messages(entries: tuple[Any, ...], dest: Address | None, src: Address) -> list[Message]:
    """Check and build every message of a bundle from its decoded ``entries``.

    Each entry is ``(flags, headers | None, payload)``, with a fourth item, the message's
    source, when it is not the bundle's ``src``. The messages are built without
    ``Message.__init__`` (its checks are the ones just made); tests/test_wire_decode_loop.py
    checks that every slot is set.
    """
    msgs: list[Message] = []
    for entry in entries:
        if type(entry) is not tuple:
            raise WireError("malformed", _BAD_ENTRY)
        size = len(entry)
        if size == 3:
            flags, hdrs, payload = entry
            msrc = src
        elif size == 4:
            flags, hdrs, payload, msrc = entry
            if type(msrc) is not Address:
                raise WireError("malformed", "bad message source")
        else:
            raise WireError("malformed", _BAD_ENTRY)
        if type(flags) is not int or flags & _BAD_FLAGS:
            raise WireError("malformed", f"bad flags {flags!r}")
        if type(payload) is not bytes:
            raise WireError("malformed", "payload is not bytes")
        if hdrs is None:
            hdrs = {}
        elif type(hdrs) is dict:
            _convert_headers(hdrs)
        else:
            raise WireError("malformed", "headers are not a map")
        msg = _new(Message)
        msg.dest = dest
        msg.src = msrc
        msg.flags = flags
        msg.headers = hdrs
        msg.payload = payload
        msgs.append(msg)
    return msgs


def _convert_headers(hdrs: dict[Any, Any]) -> None:
    """Replace each raw header in ``hdrs`` by its checked header (same keys: safe while
    iterating). An int under an id whose header may be one (`_INT_HEADERS`: an ``int``
    header, or a ``bare_int`` seqno) is kept as it is."""
    for pid, raw in hdrs.items():
        if type(pid) is not int:
            raise WireError("malformed", f"unknown protocol id {pid!r}")
        if type(raw) is int and pid in _INT_HEADERS:
            continue
        convert = _CONVERTERS.get(pid)
        if convert is None:
            raise WireError("malformed", f"unknown protocol id {pid!r}")
        try:
            hdrs[pid] = convert(raw)
        except (ValueError, TypeError) as exc:
            name = _HEADERS[pid].cls.__name__
            raise WireError("malformed", f"header {name}: {exc}") from None
