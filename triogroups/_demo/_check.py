"""The real demo's verdict: did every member deliver what the delivery contract promises?

Pure data in, problems out, so a broken log can be fed to it. Each member incarnation leaves a
log (`MemberLog`): every view it installed, in order (its id and members), with the number of
messages it had sent before it (so the messages sent in a view are the seqnos from its start to
the next view's), and per sender the seqnos it delivered, in delivery order. The rules, for a
receiver R and a sender S, are the delivery contract's (ARCHITECTURE.md; there is no FLUSH):

- always: R delivered S's messages at most once and in S's order;
- when S and R both lived to the end of the run: R delivered every message S sent in a view
  that R installed too, unless S's next view left R out (R was suspected and excluded, or it
  left: it did not stay in the view, so what S sent just before may never reach it). A view
  of S that lists R but that R never installed (R's JOIN_RSP came too late and R had started
  a group of its own) promises R nothing: R gets S's later messages once a merge view unites
  them, from the merge digest on;
- when one of them crashed (a SIGKILLed sender leaves no log), R's messages from S are one run
  without gaps (``k, k+1, k+2, ...``: NAKACK2 starts a window at the join digest and never
  skips while both are in the view), but it may end early: the crashed side takes what was
  not yet delivered with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

__all__ = ["MemberLog", "check_logs"]


@dataclass(frozen=True)
class MemberLog:
    """What one member incarnation (``uuid``, 32 hex digits) sent and delivered."""

    uuid: str
    name: str
    sent: int
    views: Sequence[tuple[int, str, Sequence[str]]]  # (messages sent before it, id, members)
    delivered: Mapping[str, Sequence[int]]  # sender uuid -> seqnos in delivery order
    survived: bool

    def installed(self) -> set[str]:
        """The ids of the views this member installed."""
        return {key for _, key, _ in self.views}

    def sent_to(self, receiver: str, installed: set[str]) -> list[int]:
        """The seqnos this member sent in a view that ``receiver`` installed too (its ids are
        ``installed``) and whose next view still had it (or that was the sender's last)."""
        seqnos: list[int] = []
        bounds = [*(start for start, _, _ in self.views[1:]), self.sent]
        nexts = [*(members for _, _, members in self.views[1:]), None]
        for (start, key, members), end, after in zip(self.views, bounds, nexts, strict=True):
            kept = after is None or receiver in after
            if receiver in members and key in installed and kept:
                seqnos.extend(range(start, end))
        return seqnos


def check_logs(logs: Sequence[MemberLog]) -> list[str]:
    """Every breach of the rules above, one line each; empty when the run kept them."""
    problems = []
    for receiver in logs:
        for sender in logs:
            got = list(receiver.delivered.get(sender.uuid, ()))
            pair = f"{receiver.name} ({receiver.uuid[:6]}) from {sender.name} ({sender.uuid[:6]})"
            both = receiver.survived and sender.survived
            if both and any(b <= a for a, b in pairwise(got)):
                problems.append(f"{pair}: duplicates or out of order: {got[:20]}")
                continue
            if not both:
                if got and got != list(range(got[0], got[0] + len(got))):
                    problems.append(f"{pair}: not one in-order run without duplicates: {got[:20]}")
                continue
            due = sender.sent_to(receiver.uuid, receiver.installed())
            missing = sorted(set(due) - set(got))
            if missing:
                problems.append(f"{pair}: missing {len(missing)} messages, first {missing[:5]}")
    return problems
