"""What the screen shows of a `Display` (member, protocol, order, filter, help) and how keys
change it.

A `Selection` names a member by address and a protocol by name, so it stays on
the same row while members come and go; `Selection.resolve` falls back to the
first visible member and its first protocol when the named ones are gone. It
also holds the order of the rows (``sort``, cycled by ``s``), the filter (typed
after ``/``: rows whose label or name contain it, any case, whose address
starts with it (4 characters at least) or whose pid it is) and whether the help is open (``?``).

While the filter is typed every printable key is text: Enter keeps it,
Escape clears it, Backspace takes a character off; only Ctrl-C still quits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from triogroups.inspector._model import Display, MemberState

__all__ = ["QUIT", "SORTS", "Selection", "apply_key", "visible"]

QUIT = "quit"
"""What `apply_key` returns for the keys that end the inspector (q, Ctrl-C)."""

SORTS = ("name", "msgs/s", "warnings", "pid")
"""The row orders ``s`` cycles through (within each cluster)."""

_MEMBER_KEYS = {"up": -1, "k": -1, "down": 1, "j": 1}
_PROTOCOL_KEYS = {"left": -1, "h": -1, "right": 1, "l": 1, "tab": 1, "shift-tab": -1}
_QUIT_KEYS = {"q", "Q", "ctrl-c"}
_PREFIX = 4  # an address prefix this long names a member, as for probes


@dataclass(frozen=True)
class Selection:
    """The chosen member (address) and protocol (layer name), None: the first one; the row
    order, the filter (``typing``: it is being typed), and whether the help is shown."""

    member: str | None = None
    protocol: str | None = None
    sort: str = SORTS[0]
    filter: str = ""
    typing: bool = False
    help: bool = False

    def resolve(self, display: Display) -> tuple[MemberState | None, str | None]:
        """The selected member and protocol name as they exist in ``display``."""
        members = visible(display, self)
        if not members:
            return None, None
        member = next((m for m in members if m.address == self.member), members[0])
        names = [p.name for p in member.protocols]
        if not names:
            return member, None
        return member, self.protocol if self.protocol in names else names[0]


def _matches(member: MemberState, text: str) -> bool:
    if not text:
        return True
    text = text.lower()
    if text in member.label.lower() or text in member.name.lower():
        return True
    return len(text) >= _PREFIX and (member.address.startswith(text) or str(member.pid) == text)


def _sort_key(sort: str, member: MemberState) -> tuple[object, ...]:
    by_name = (member.label, member.address)
    if sort == "msgs/s":
        rate = member.throughput[-1] if member.throughput and member.answered else -1.0
        return (-rate, *by_name)
    if sort == "warnings":
        return (-len(member.warnings), *by_name)
    if sort == "pid":
        return (member.pid, *by_name)
    return by_name


def visible(display: Display, selection: Selection) -> list[MemberState]:
    """The rows shown, in screen order: by cluster, then by ``selection.sort``; filtered."""
    rows = [m for m in display.members.values() if _matches(m, selection.filter)]
    return sorted(rows, key=lambda m: (m.cluster, *_sort_key(selection.sort, m)))


def _typing(selection: Selection, key: str) -> Selection | str:
    if key == "ctrl-c":
        return QUIT
    if key == "enter":
        return replace(selection, typing=False)
    if key == "escape":
        return replace(selection, typing=False, filter="")
    if key == "backspace":
        return replace(selection, filter=selection.filter[:-1])
    if len(key) == 1 and key.isprintable():
        return replace(selection, filter=selection.filter + key)
    return selection


def apply_key(selection: Selection, display: Display | None, key: str) -> Selection | str:
    """The selection after ``key``, or `QUIT`; unknown keys change nothing."""
    if selection.typing:
        return _typing(selection, key)
    if key in _QUIT_KEYS:
        return QUIT
    if key == "?":
        return replace(selection, help=not selection.help)
    if key == "escape":
        return replace(selection, help=False, filter="")
    if key == "/":
        return replace(selection, typing=True, help=False)
    if key == "s":
        return replace(selection, sort=SORTS[(SORTS.index(selection.sort) + 1) % len(SORTS)])
    if display is None:
        return selection
    member, protocol = selection.resolve(display)
    if member is None:
        return selection
    if key in _MEMBER_KEYS:
        members = visible(display, selection)
        index = members.index(member) + _MEMBER_KEYS[key]
        chosen = members[max(0, min(len(members) - 1, index))]
        return replace(selection, member=chosen.address, protocol=protocol)
    if key in _PROTOCOL_KEYS and protocol is not None:
        names = [p.name for p in member.protocols]
        index = (names.index(protocol) + _PROTOCOL_KEYS[key]) % len(names)
        return replace(selection, member=member.address, protocol=names[index])
    return selection
