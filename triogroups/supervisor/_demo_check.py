"""The real demo's verdict: did every member deliver what the delivery contract promises?

Pure data in, problems out, so a broken log can be fed to it. Each member incarnation leaves a
log (`MemberLog`): the messages it sent with the view it had before each one (as the seqno from
which a view applied), and per sender the seqnos it delivered, in delivery order. The rule,
for a receiver R and a sender S:

- always: R delivered S's messages exactly once and in S's order, as one run without gaps
  (``k, k+1, k+2, ...``: NAKACK2 starts a joiner's window at its join digest and never skips);
- when both S and R lived to the end of the run: that run covers every message S sent while
  R was in S's view. A member that crashed takes its undelivered messages with it (there is
  no FLUSH), so for a pair with a crashed side only the first rule holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MemberLog", "check_logs"]


@dataclass(frozen=True)
class MemberLog:
    """What one member incarnation (``uuid``, 32 hex digits) sent and delivered."""

    uuid: str
    name: str
    sent: int
    views: Sequence[tuple[int, Sequence[str]]]  # (first seqno sent in it, member uuids)
    delivered: Mapping[str, Sequence[int]]  # sender uuid -> seqnos in delivery order
    survived: bool

    def sent_to(self, receiver: str) -> list[int]:
        """The seqnos this member sent while ``receiver`` was in its view."""
        seqnos: list[int] = []
        bounds = [*(start for start, _ in self.views[1:]), self.sent]
        for (start, members), end in zip(self.views, bounds, strict=True):
            if receiver in members:
                seqnos.extend(range(start, end))
        return seqnos


def check_logs(logs: Sequence[MemberLog]) -> list[str]:
    """Every breach of the rules above, one line each; empty when the run kept them."""
    problems = []
    for receiver in logs:
        for sender in logs:
            got = list(receiver.delivered.get(sender.uuid, ()))
            pair = f"{receiver.name} ({receiver.uuid[:6]}) from {sender.name} ({sender.uuid[:6]})"
            if got and got != list(range(got[0], got[0] + len(got))):
                problems.append(f"{pair}: not one in-order run without duplicates: {got[:20]}")
                continue
            if not (receiver.survived and sender.survived):
                continue
            missing = sorted(set(sender.sent_to(receiver.uuid)) - set(got))
            if missing:
                problems.append(f"{pair}: missing {len(missing)} messages, first {missing[:5]}")
    return problems
