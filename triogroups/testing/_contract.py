"""The delivery contract, as a checker over what members sent and delivered.

Per sender and receiver: regular messages are delivered exactly once and in
send order, and (once the network has healed) none is missing. OOB messages
must arrive exactly once, in any order. Across membership changes a receiver
may miss what was sent in a view it was not in: ``gaps=True`` checks only
that what it did deliver came once each and in send order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise

from triogroups.address import Address

__all__ = ["ContractViolation", "DeliveryLog"]


class ContractViolation(AssertionError):
    """What a member delivered breaks the delivery contract."""


@dataclass
class DeliveryLog:
    """What each member sent (in order) and delivered, keyed by payload.

    A message is identified by its sender and its payload, so the payloads a
    member sends must be unique for the whole run among everything one
    receiver gets from it: its multicasts and its unicasts to that receiver
    (``b"A-17"``, not ``b"hi"`` twice; the same payload as unicasts to two
    different members is fine). `check` raises ContractViolation naming the
    first repeated one, rather than mistaking one message for another.
    """

    sent: dict[tuple[Address, Address | None], list[bytes]] = field(default_factory=dict)
    sent_oob: dict[tuple[Address, Address | None], list[bytes]] = field(default_factory=dict)
    delivered: dict[tuple[Address, Address], list[bytes]] = field(default_factory=dict)
    #: Per (sender, destination), every payload sent; per sender, the first repeated one.
    payloads: dict[tuple[Address, Address | None], set[bytes]] = field(default_factory=dict)
    repeated: dict[Address, bytes] = field(default_factory=dict)

    def record_send(self, src: Address, dest: Address | None, payload: bytes, oob: bool) -> None:
        """Log a message ``src`` is about to send (see the class docstring on uniqueness)."""
        table = self.sent_oob if oob else self.sent
        table.setdefault((src, dest), []).append(payload)
        payloads = self.payloads
        if dest is None:
            clash = any(payload in seen for (s, _), seen in payloads.items() if s == src)
        else:
            clash = payload in payloads.get((src, dest), ()) or payload in payloads.get(
                (src, None), ()
            )
        if clash:
            self.repeated.setdefault(src, payload)
        payloads.setdefault((src, dest), set()).add(payload)

    def unrecord_send(self, src: Address, dest: Address | None, payload: bytes, oob: bool) -> None:
        """Take back `record_send`: the send was cancelled before the stack took it."""
        sent = (self.sent_oob if oob else self.sent).get((src, dest), [])
        if payload in sent:
            del sent[len(sent) - 1 - sent[::-1].index(payload)]
        self.payloads.get((src, dest), set()).discard(payload)

    def record_delivery(self, receiver: Address, src: Address, payload: bytes) -> None:
        """Log that ``receiver`` delivered ``payload`` from ``src`` (in delivery order)."""
        self.delivered.setdefault((receiver, src), []).append(payload)

    def all_arrived(self, receivers: Iterable[Address], senders: Iterable[Address]) -> bool:
        """Cheap test: has every receiver delivered at least as many messages as were
        sent to it by each sender? (`check` then verifies order and identity.)"""
        senders = list(senders)
        for receiver in receivers:
            for src in senders:
                want = len(self.expected(receiver, src, oob=False))
                want += len(self.expected(receiver, src, oob=True))
                if len(self.delivered.get((receiver, src), ())) < want:
                    return False
        return True

    def expected(self, receiver: Address, src: Address, *, oob: bool) -> list[bytes]:
        """What ``receiver`` must deliver from ``src``: multicasts plus unicasts to it."""
        table = self.sent_oob if oob else self.sent
        return table.get((src, None), []) + table.get((src, receiver), [])

    def check(
        self,
        receivers: Iterable[Address],
        senders: Iterable[Address],
        *,
        complete: bool = True,
        gaps: bool = False,
    ) -> None:
        """Raise ContractViolation unless every receiver's deliveries obey the contract.

        Also raised when a sender repeated a payload (see the class docstring).

        ``complete=False`` checks only FIFO and exactly-once (a prefix is fine),
        for use while messages may still be in flight. ``gaps=True`` (implies
        ``complete=False``) accepts any subsequence of each sender's stream in
        send order: what survives partitions, merges and rejoins.
        """
        complete = complete and not gaps
        senders = list(senders)
        for src in senders:
            if src in self.repeated:
                raise ContractViolation(
                    f"{src} sent payload {self.repeated[src]!r} more than once: the contract "
                    "check identifies messages by sender and payload, so each payload a "
                    "member sends must be unique for the whole run (per receiver)"
                )
        for receiver in receivers:
            for src in senders:
                got = self.delivered.get((receiver, src), [])
                counts = Counter(got)
                dupes = [p for p, c in counts.items() if c > 1]
                if dupes:
                    raise ContractViolation(
                        f"{receiver} delivered {len(dupes)} message(s) from {src} more than "
                        f"once, e.g. {dupes[0]!r}"
                    )
                regular = set(self.expected(receiver, src, oob=False))
                oob = set(self.expected(receiver, src, oob=True))
                unknown = [p for p in got if p not in oob and p not in regular]
                if unknown:
                    raise ContractViolation(
                        f"{receiver} delivered {len(unknown)} message(s) {src} never sent to "
                        f"it, e.g. {unknown[0]!r}"
                    )
                got_regular = [p for p in got if p not in oob]
                self._check_order(receiver, src, got_regular, complete, gaps)
                if complete and oob - set(got):
                    missing = sorted(oob - set(got))
                    raise ContractViolation(
                        f"{receiver} is missing {len(missing)} OOB message(s) from {src}, "
                        f"e.g. {missing[0]!r}"
                    )

    def _check_order(
        self, receiver: Address, src: Address, got: list[bytes], complete: bool, gaps: bool
    ) -> None:
        multicasts = self.sent.get((src, None), [])
        unicasts = self.sent.get((src, receiver), [])
        # Unicasts and multicasts are ordered per channel: check each stream on its own.
        for label, stream in (("multicast", multicasts), ("unicast", unicasts)):
            members = set(stream)
            seen = [p for p in got if p in members]
            if gaps:
                _check_subsequence(receiver, src, label, seen, stream)
                continue
            if seen != stream[: len(seen)]:
                first = next(
                    i for i, (a, b) in enumerate(zip(seen, stream, strict=False)) if a != b
                )
                raise ContractViolation(
                    f"{receiver} delivered {label}s from {src} out of order at position "
                    f"{first}: got {seen[first]!r}, expected {stream[first]!r}"
                )
            if complete and len(seen) < len(stream):
                raise ContractViolation(
                    f"{receiver} is missing {len(stream) - len(seen)} {label}(s) from {src}; "
                    f"first missing {stream[len(seen)]!r}"
                )


def _check_subsequence(
    receiver: Address, src: Address, label: str, seen: list[bytes], stream: list[bytes]
) -> None:
    """``seen`` (no duplicates) must keep ``stream``'s order, whatever it skipped."""
    position = {p: i for i, p in enumerate(stream)}
    for before, after in pairwise(seen):
        if position[before] > position[after]:
            raise ContractViolation(
                f"{receiver} delivered {label}s from {src} out of order: {after!r} after {before!r}"
            )
