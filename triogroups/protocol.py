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

A protocol counts in one place, its `counters` (and time accumulated, such
as ``time_blocked``, in its `durations`), both created by this base class:
`stats` reports them with what the protocol adds in `gauges`, and
`reset_stats` zeroes them, so no protocol writes either method.

A protocol that passes some messages on untouched may say so (`passes_up`,
`passes_down`): the host then moves a batch made only of such messages past
the idle layer without calling the handler, which is most of what a hop of
the data path costs in the layers that do not look at it.
"""

from __future__ import annotations

import difflib
import math
from typing import Any, ClassVar, Literal

from triogroups.address import Address
from triogroups.events import Event, Item, ViewChange
from triogroups.message import Message
from triogroups.properties import Property, PropertyError
from triogroups.view import View

__all__ = ["Passes", "Protocol", "protocol_class", "protocol_names"]

#: Which messages a protocol passes on untouched (`Protocol.passes_up`): every one
#: without its header, or only the unicasts (``dest`` set) or multicasts among them.
Passes = Literal["all", "unicasts", "multicasts"]

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
    #: The names of the protocol's counters: each is in `counters` (and `stats`) from the
    #: start, 0 until counted. A name made up while running (GMS counts received messages
    #: by type) is added on first count, with ``counters.get(key, 0) + 1``.
    COUNTERS: ClassVar[tuple[str, ...]] = ()
    #: The names of the protocol's `durations` (seconds accumulated), 0.0 from the start.
    DURATIONS: ClassVar[tuple[str, ...]] = ()
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
        #: What the protocol counted since it started or since the last `reset_stats`, by
        #: name (`COUNTERS`). Owned by the protocol; a helper that counts for it is handed
        #: this dict, never a copy, and nobody replaces it (hot paths keep a local
        #: reference). A plain dict, not a `collections.Counter`: Python specialises item
        #: access for exact dicts only, and the data path counts here.
        self.counters: dict[str, int] = dict.fromkeys(self.COUNTERS, 0)
        #: Seconds accumulated by name (`DURATIONS`), reported and reset like `counters`.
        self.durations: dict[str, float] = dict.fromkeys(self.DURATIONS, 0.0)

    # --- configuration -------------------------------------------------------

    @classmethod
    def declared_properties(cls) -> dict[str, Property[Any]]:
        """Property name -> its declaration (default, doc, rule, `Property.show`), for help
        texts (``triogroups protocol X``) and the inspector."""
        return dict(cls._properties)

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
        """Called once by the host before any other handler (and before `next_deadline`).

        Sets `local_address` and `cluster`; an override that arms a timer
        calls ``super().start(...)`` first and computes its first deadline
        from ``now`` here. A restarted stack builds fresh protocol objects,
        so this is never called twice on one object.
        """
        self.local_address = local_address
        self.cluster = cluster

    def check_stack(self, below: list[Protocol], above: list[Protocol]) -> None:
        """Hook: refuse a stack this protocol cannot work in (raise PropertyError).

        ``below`` runs from the transport up to the layer under this one.
        """

    def down(self, batch: list[Message], now: float) -> None:
        """Handle a batch going down (from the application side); default: pass it on.

        The batch belongs to the protocol from now on: it may be forwarded
        as is, mutated or split. Messages keep their order
        within a batch and across batches. Emit with `send_down` (and
        `send_up` for what is looped back); never await, never drop silently.
        """
        self.send_down(batch)

    def up(self, batch: list[Message], now: float) -> None:
        """Handle a batch coming up (from the network side); default: pass it on.

        As `down`, the other way: what is for the layers above goes out
        with `send_up`, answers (acks, retransmissions) with `send_down`.
        Input from the network is hostile: a bad header is counted, not raised.
        """
        self.send_up(batch)

    def down_event(self, event: Event, now: float) -> None:
        """Handle an event going down; default: `view_changed` for a view, then pass it on.

        An override handles the events it knows and calls
        ``super().down_event(event, now)`` for the rest, so events it does
        not know keep travelling and keep their place among the batches.
        """
        if isinstance(event, ViewChange):
            self.view_changed(event.view, now)
        self.pass_down(event)

    def up_event(self, event: Event, now: float) -> None:
        """Handle an event coming up; default: `view_changed` for a view, then pass it on.

        As `down_event`, the other way (discovery answers, suspicions, ...).
        """
        if isinstance(event, ViewChange):
            self.view_changed(event.view, now)
        self.pass_up(event)

    def view_changed(self, view: View, now: float) -> None:
        """Hook: a view was installed (a `ViewChange` went by); sets `view`.

        Called by the default `down_event` / `up_event` before the event is
        passed on. An override calls ``super().view_changed(view, now)`` and
        then drops state for members that left (windows, credits, timers),
        so nothing waits for ever on a member that is gone.
        """
        self.view = view

    def tick(self, now: float) -> None:
        """Hook: called by the host once ``now >= next_deadline()``.

        It must move `next_deadline` past ``now`` (to a later time or to
        inf): the host crashes the layer otherwise, since a deadline left due
        would spin for ever (on a virtual clock time would stand still).
        """

    def next_deadline(self) -> float:
        """When `tick` should next run, in the host's clock (absolute); inf for never.

        Read by the host after every handler, so a handler that arms or
        disarms a timer only changes what this returns.
        """
        return math.inf

    def blocks_down(self) -> bool:
        """True while the protocol holds back senders (a full window, no credits).

        Read by the host after every handler. While any layer answers True,
        new batches wait at the top of the stack (`Stack.send`); this layer
        keeps getting batches already on their way and must queue them, and
        keeps handling everything else, so what frees it (acks, credits, a
        view change) can arrive.
        """
        return False

    @property
    def passes_up(self) -> Passes | None:
        """A promise about `up`, as things stand: a batch in which every message is of
        this kind and carries no header of ``id`` comes out as ``send_up(batch)`` and
        nothing else (no state, counter, timer or blocking change, whatever the time).
        The host then forwards such a batch past the idle layer without calling `up`.
        None (the default): no promise.

        A subclass promises with a class attribute (``passes_up = "all"``), or with a
        property when the promise holds only in some states (while no discovery runs);
        the host reads it before every batch. `tests/protocols/test_passes.py` holds
        every protocol to its word."""
        return None

    @property
    def passes_down(self) -> Passes | None:
        """The same promise about `down` (``send_down(batch)`` and nothing else)."""
        return None

    def stats(self) -> dict[str, Any]:
        """A plain snapshot for probes and the inspector (msgpack-able values): the
        `counters`, the `durations` and the protocol's `gauges`."""
        return {**self.counters, **self.durations, **self.gauges()}

    def gauges(self) -> dict[str, Any]:
        """What `stats` reports beside the counters and durations: gauges (windows,
        queues, states) and figures derived from the counters, none of which a
        `reset_stats` zeroes. Hook; the default reports none."""
        return {}

    def reset_stats(self) -> None:
        """Zero the `counters` and `durations` in place (a probe's ``reset``); gauges such
        as windows stay as they are."""
        counters, durations = self.counters, self.durations
        for key in counters:
            counters[key] = 0
        for name in durations:
            durations[name] = 0.0

    # --- outputs ----------------------------------------------------------------

    def send_down(self, batch: list[Message]) -> None:
        """Emit ``batch`` to the layer below, after what was emitted before (never awaits).

        Consecutive batches are merged into one item; an empty batch emits
        nothing. The host forwards the outbox after the handler returns.
        """
        out = self._down_out
        if out and type(out[-1]) is list:
            out[-1].extend(batch)
        elif batch:
            out.append(batch)

    def send_up(self, batch: list[Message]) -> None:
        """Emit ``batch`` to the layer above (deliver it), in order; as `send_down`."""
        out = self._up_out
        if out and type(out[-1]) is list:
            out[-1].extend(batch)
        elif batch:
            out.append(batch)

    def send_down_one(self, msg: Message) -> None:
        """Emit one message downwards (an ack, a retransmission): `send_down` of ``[msg]``."""
        out = self._down_out
        if out and type(out[-1]) is list:
            out[-1].append(msg)  # type: ignore[union-attr,unused-ignore]
        else:
            out.append([msg])

    def send_up_one(self, msg: Message) -> None:
        """Emit one message upwards: `send_up` of ``[msg]``."""
        out = self._up_out
        if out and type(out[-1]) is list:
            out[-1].append(msg)  # type: ignore[union-attr,unused-ignore]
        else:
            out.append([msg])

    def pass_down(self, event: Event) -> None:
        """Emit ``event`` to the layer below, after the batches emitted before it."""
        self._down_out.append(event)

    def pass_up(self, event: Event) -> None:
        """Emit ``event`` to the layer above, after the batches emitted before it."""
        self._up_out.append(event)

    def take_down(self) -> list[Item]:
        """Everything emitted downwards since the last call, in order; empties the outbox.

        For the host (after every handler) and for unit tests that drive a
        protocol by hand.
        """
        out = self._down_out
        self._down_out = []
        return out

    def take_up(self) -> list[Item]:
        """Everything emitted upwards since the last call, in order; as `take_down`."""
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
    """The names a stack config may use (every registered protocol), sorted."""
    return sorted(_REGISTRY)
