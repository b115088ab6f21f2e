"""DISCARD: drops messages on purpose, to test reliability and partitions.

Drops by probability (``up``, ``down``), everything (``discard_all``), the
next N unicasts or multicasts going down, and all traffic from or to chosen
members (`ignore`, `drop_to`), which is how tests make partitions in real
stacks. Randomness comes from a seeded generator (``seed``), so a run that
loses messages can be repeated exactly.

Never place DISCARD below a NAKACK2 with ``xmit_interval <= 0``: with no
retransmission a dropped message leaves a gap forever (NAKACK2 refuses such a
stack at build time).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from triogroups.address import Address
from triogroups.message import Message
from triogroups.properties import Bool, Float, Int, at_least, between
from triogroups.protocol import Protocol

__all__ = ["Discard"]


class Discard(Protocol):
    """Drops messages going up or down; counts what it dropped."""

    name = "DISCARD"
    COUNTERS = ("dropped_up", "dropped_down")

    up_loss = Float(
        0.0,
        doc="probability of dropping a message coming up",
        check=between(0, 1),
    )
    down_loss = Float(
        0.0,
        doc="probability of dropping a message going down",
        check=between(0, 1),
    )
    discard_all = Bool(False, doc="drop every message in both directions")
    drop_down_unicasts = Int(
        0,
        doc="drop the next N unicasts going down",
        check=at_least(0),
    )
    drop_down_multicasts = Int(
        0,
        doc="drop the next N multicasts going down",
        check=at_least(0),
    )
    exclude_itself = Bool(True, doc="never drop messages this member sent to itself")
    seed = Int(0, doc="seed of the drop decisions (None: from the OS)", nullable=True)

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self._rng = random.Random(self.seed)
        self._ignored: set[Address] = set()
        self._dropped_to: set[Address] = set()
        self._rules: dict[str, list[list[Any]]] = {"down": [], "up": []}

    # --- runtime control (tests and the chaos tooling call these) ---------------

    def ignore(self, *members: Address) -> None:
        """Drop everything that comes up from these members."""
        self._ignored.update(members)

    def drop_to(self, *members: Address) -> None:
        """Drop every unicast going down to these members."""
        self._dropped_to.update(members)

    def drop_if(
        self,
        predicate: Callable[[Message], bool],
        *,
        direction: str = "down",
        count: int | None = 1,
    ) -> None:
        """Drop the next ``count`` messages (None: all) going ``direction`` that match.

        Seed scenarios use this to lose one precise message ("A loses #1").
        """
        if direction not in self._rules:
            raise ValueError(f"direction must be 'down' or 'up', got {direction!r}")
        if count is not None and count < 1:
            raise ValueError(f"count must be >= 1 or None, got {count}")
        self._rules[direction].append([predicate, count])

    def _matches_rule(self, direction: str, msg: Message) -> bool:
        rules = self._rules[direction]
        for rule in rules:
            if rule[0](msg):
                if rule[1] is not None:
                    rule[1] -= 1
                    if rule[1] == 0:
                        rules.remove(rule)
                return True
        return False

    def reset(self) -> None:
        """Stop dropping by member, by rule, by count and everything; keeps the probabilities."""
        self._ignored.clear()
        self._dropped_to.clear()
        self._rules = {"down": [], "up": []}
        self.discard_all = False
        self.drop_down_unicasts = 0
        self.drop_down_multicasts = 0

    def property_changed(self, key: str, now: float) -> None:
        """Every property is read where it is used, so a run-time change (a probe's
        ``set``) acts on the next message; a new ``seed`` restarts the drop decisions."""
        if key == "seed":
            self._rng = random.Random(self.seed)

    # --- handlers -------------------------------------------------------------------

    def _to_self(self, msg: Message) -> bool:
        return self.exclude_itself and msg.dest == self.local_address and msg.dest is not None

    def down(self, batch: list[Message], now: float) -> None:
        if not (
            self.down_loss
            or self.discard_all
            or self._dropped_to
            or self.drop_down_unicasts
            or self.drop_down_multicasts
            or self._rules["down"]
        ):
            self.send_down(batch)
            return
        kept = []
        for msg in batch:
            if self._to_self(msg):
                kept.append(msg)
            elif self._drop_down(msg):
                self.counters["dropped_down"] += 1
            else:
                kept.append(msg)
        self.send_down(kept)

    def _drop_down(self, msg: Message) -> bool:
        if self.discard_all or msg.dest in self._dropped_to:
            return True
        if self._rules["down"] and self._matches_rule("down", msg):
            return True
        if msg.dest is None and self.drop_down_multicasts > 0:
            self.drop_down_multicasts -= 1
            return True
        if msg.dest is not None and self.drop_down_unicasts > 0:
            self.drop_down_unicasts -= 1
            return True
        return self.down_loss > 0 and self._rng.random() < self.down_loss

    def up(self, batch: list[Message], now: float) -> None:
        if not (self.up_loss or self.discard_all or self._ignored or self._rules["up"]):
            self.send_up(batch)
            return
        kept = []
        for msg in batch:
            if self.exclude_itself and msg.src == self.local_address:
                kept.append(msg)
            elif (
                self.discard_all
                or msg.src in self._ignored
                or (self._rules["up"] and self._matches_rule("up", msg))
                or (self.up_loss > 0 and self._rng.random() < self.up_loss)
            ):
                self.counters["dropped_up"] += 1
            else:
                kept.append(msg)
        self.send_up(kept)

    def gauges(self) -> dict[str, Any]:
        return {
            "ignored": sorted(map(str, self._ignored)),
            "dropped_to": sorted(map(str, self._dropped_to)),
        }
