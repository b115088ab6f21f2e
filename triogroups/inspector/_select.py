"""Which member and which protocol the detail pane shows, and how keys move the choice.

A `Selection` names a member by address and a protocol by name, so it stays on
the same row while members come and go; `Selection.resolve` falls back to the
first member and its first protocol when the named ones are gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from triogroups.inspector._model import Display, MemberState

__all__ = ["QUIT", "Selection", "apply_key"]

QUIT = "quit"
"""What `apply_key` returns for the keys that end the inspector (q, Ctrl-C)."""

_MEMBER_KEYS = {"up": -1, "k": -1, "down": 1, "j": 1}
_PROTOCOL_KEYS = {"left": -1, "h": -1, "right": 1, "l": 1, "tab": 1, "shift-tab": -1}
_QUIT_KEYS = {"q", "Q", "ctrl-c"}


@dataclass(frozen=True)
class Selection:
    """The chosen member (address) and protocol (layer name); None: the first one."""

    member: str | None = None
    protocol: str | None = None

    def resolve(self, display: Display) -> tuple[MemberState | None, str | None]:
        """The selected member and protocol name as they exist in ``display``."""
        members = display.ordered()
        if not members:
            return None, None
        member = display.members.get(self.member or "", members[0])
        names = [p.name for p in member.protocols]
        if not names:
            return member, None
        return member, self.protocol if self.protocol in names else names[0]


def apply_key(selection: Selection, display: Display | None, key: str) -> Selection | str:
    """The selection after ``key``, or `QUIT`; unknown keys change nothing."""
    if key in _QUIT_KEYS:
        return QUIT
    if display is None:
        return selection
    member, protocol = selection.resolve(display)
    if member is None:
        return selection
    if key in _MEMBER_KEYS:
        members = display.ordered()
        index = members.index(member) + _MEMBER_KEYS[key]
        chosen = members[max(0, min(len(members) - 1, index))]
        return Selection(chosen.address, protocol)
    if key in _PROTOCOL_KEYS and protocol is not None:
        names = [p.name for p in member.protocols]
        index = (names.index(protocol) + _PROTOCOL_KEYS[key]) % len(names)
        return Selection(member.address, names[index])
    return selection
