"""The sans-IO protocol contract every layer implements.

A protocol is plain synchronous Python: it never awaits, never touches a
socket and never reads a clock. The stack host (or a unit test) calls its
handlers with the current time passed in:

- `down` / `up`: a batch of messages going down (from the application side)
  or coming up (from the network side);
- `down_event` / `up_event`: an `Event` travelling the same way;
- `view_changed`: called by the default event handlers for a `ViewChange`;
- `tick`: called once ``now >= next_deadline()``.

Handlers emit by calling `send_down`, `send_up`, `pass_down` and `pass_up`,
which append to per-direction outboxes; the host takes them with
`take_down` / `take_up` after every handler and forwards them in order. A
protocol that must hold back senders (a full window, no credits) keeps what
it cannot send and answers True from `blocks_down`; the host then makes
new sends wait at the top of the stack, while every layer keeps handling
batches, events and ticks in both directions, so acks can free space, a view
change can release the window and nothing deadlocks. Messages that were
already on their way down when the protocol blocked still arrive and must be
queued (their number is bounded by the channels between the layers).

A batch handed to a handler belongs to the protocol from then on; it may be
forwarded as is (no copy) or mutated.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, ClassVar

from triogroups.address import Address
from triogroups.events import Event, Item, ViewChange
from triogroups.message import Message
from triogroups.properties import Property, PropertyError
from triogroups.view import View

__all__ = ["Protocol", "protocol_class", "protocol_names"]

_REGISTRY: dict[str, type[Protocol]] = {}
_IDS: dict[int, str] = {}


class Protocol:
    """Base class of sans-IO protocols.

    Subclasses set ``name`` (the seed/JGroups name, e.g. "UNICAST3") and, if
    they put headers on messages, a unique ``id``; both register the class so
    stack configs can name it.
    """

    name: ClassVar[str] = ""
    id: ClassVar[int] = 0
    _properties: ClassVar[dict[str, Property[Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        props: dict[str, Property[Any]] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, Property):
                    props[attr] = value
        cls._properties = props
        if cls.name and "name" in vars(cls):
            other = _REGISTRY.get(cls.name)
            if other is not None and other.__qualname__ != cls.__qualname__:
                raise ValueError(f"protocol name {cls.name} is taken by {other.__qualname__}")
            _REGISTRY[cls.name] = cls
            if cls.id:
                owner = _IDS.get(cls.id)
                if owner is not None and owner != cls.name:
                    raise ValueError(f"protocol id {cls.id} of {cls.name} is taken by {owner}")
                _IDS[cls.id] = cls.name

    def __init__(self, **properties: Any) -> None:
        label = self.name or type(self).__name__
        for key, value in properties.items():
            prop = self._properties.get(key)
            if prop is None:
                known = ", ".join(sorted(self._properties)) or "none"
                raise PropertyError(f"{label} has no property {key!r} (known: {known})")
            setattr(self, key, prop.validate(label, value))
        for key, prop in self._properties.items():
            if key not in properties:
                setattr(self, key, prop.validate(label, prop.default))
        self.local_address: Address | None = None
        self.cluster = ""
        self.view: View | None = None
        self._down_out: list[Item] = []
        self._up_out: list[Item] = []

    # --- configuration -------------------------------------------------------

    @classmethod
    def property_docs(cls) -> dict[str, tuple[Any, str]]:
        """Property name -> (default, doc), for help texts and the inspector."""
        return {k: (p.default, p.doc) for k, p in cls._properties.items()}

    def properties(self) -> dict[str, Any]:
        """Current property values."""
        return {k: getattr(self, k) for k in self._properties}

    def set_property(self, key: str, value: Any, now: float) -> None:
        """Change a property at run time (validated), then `property_changed`."""
        label = self.name or type(self).__name__
        prop = self._properties.get(key)
        if prop is None:
            raise PropertyError(f"{label} has no property {key!r}")
        setattr(self, key, prop.validate(label, value))
        self.property_changed(key, now)

    def property_changed(self, key: str, now: float) -> None:
        """Hook: a property was changed at run time."""

    # --- lifecycle and handlers ------------------------------------------------

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        """Called once by the host before any other handler."""
        self.local_address = local_address
        self.cluster = cluster

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Hook: refuse a stack this protocol cannot work in (raise PropertyError).

        ``below`` runs from the transport up to the layer under this one.
        """

    def down(self, batch: list[Message], now: float) -> None:
        self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        self.send_up(batch)

    def down_event(self, event: Event, now: float) -> None:
        if isinstance(event, ViewChange):
            self.view_changed(event.view, now)
        self.pass_down(event)

    def up_event(self, event: Event, now: float) -> None:
        if isinstance(event, ViewChange):
            self.view_changed(event.view, now)
        self.pass_up(event)

    def view_changed(self, view: View, now: float) -> None:
        """Hook: a view was installed."""
        self.view = view

    def tick(self, now: float) -> None:
        """Hook: called when ``now >= next_deadline()``."""

    def next_deadline(self) -> float:
        """When `tick` should next run (absolute time); inf for never."""
        return math.inf

    def blocks_down(self) -> bool:
        """True while the protocol holds back senders (window full, no credits)."""
        return False

    def stats(self) -> dict[str, Any]:
        """A plain snapshot of counters and gauges."""
        return {}

    # --- outputs ----------------------------------------------------------------

    def send_down(self, batch: list[Message]) -> None:
        out = self._down_out
        if out and type(out[-1]) is list:
            out[-1].extend(batch)
        elif batch:
            out.append(batch)

    def send_up(self, batch: list[Message]) -> None:
        out = self._up_out
        if out and type(out[-1]) is list:
            out[-1].extend(batch)
        elif batch:
            out.append(batch)

    def send_down_one(self, msg: Message) -> None:
        out = self._down_out
        if out and type(out[-1]) is list:
            out[-1].append(msg)  # type: ignore[union-attr,unused-ignore]
        else:
            out.append([msg])

    def send_up_one(self, msg: Message) -> None:
        out = self._up_out
        if out and type(out[-1]) is list:
            out[-1].append(msg)  # type: ignore[union-attr,unused-ignore]
        else:
            out.append([msg])

    def pass_down(self, event: Event) -> None:
        self._down_out.append(event)

    def pass_up(self, event: Event) -> None:
        self._up_out.append(event)

    def take_down(self) -> list[Item]:
        out = self._down_out
        self._down_out = []
        return out

    def take_up(self) -> list[Item]:
        out = self._up_out
        self._up_out = []
        return out

    def __repr__(self) -> str:
        return f"<{self.name or type(self).__name__} at {self.local_address}>"


def protocol_class(name: str) -> type[Protocol]:
    """The registered protocol class for a stack config name.

    Names are exact, upper-case as in JGroups (``"UNICAST3"``); a name that
    differs only in case, or is close to a known one, is refused with the
    name it probably meant.
    """
    cls = _REGISTRY.get(name)
    if cls is None:
        if name.upper() in _REGISTRY:
            raise PropertyError(
                f"unknown protocol {name!r}: protocol names are upper-case, "
                f"did you mean {name.upper()!r}?"
            )
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        known = ", ".join(sorted(_REGISTRY))
        raise PropertyError(f"unknown protocol {name!r} ({hint}known: {known})")
    return cls


def protocol_names() -> list[str]:
    return sorted(_REGISTRY)
