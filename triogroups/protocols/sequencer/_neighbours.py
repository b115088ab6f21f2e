"""SEQUENCER and the layers around it: where it may sit, and what GMS's views passing up say.

SEQUENCER needs NAKACK2 and UNICAST3 below it and STABLE and GMS above (`check_placement`).
Sitting below GMS, it handles a whole batch before GMS installs a view that came in it,
so a BCAST that arrived after a VIEW would be judged by the view before: one of the old
coordinator's, delivered so, is an order the members that installed the view first have
dropped. `changes_coordinator` reads GMS's header and says whether such a view changes
our coordinator; the protocol then holds its coordinator's BCASTs behind it, as it does
behind a BCAST stamped with a view to come. Pure functions: nothing here sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from triogroups.address import Address
from triogroups.properties import PropertyError
from triogroups.protocol import Protocol
from triogroups.protocols.gms._header import VIEW, GmsHeader, follows
from triogroups.view import ViewId

__all__ = ["changes_coordinator", "check_placement"]


def check_placement(below: Sequence[Protocol], above: Sequence[Protocol]) -> None:
    """Refuse a stack without NAKACK2 and UNICAST3 below, or without STABLE and GMS above
    (see the package docstring for why each is needed)."""
    for side, layers, needed in (
        ("below", below, ("NAKACK2", "UNICAST3")),
        ("above", above, ("STABLE", "GMS")),
    ):
        names = {p.name for p in layers}
        for name in needed:
            if name not in names:
                got = ", ".join(p.name for p in layers) or "nothing"
                raise PropertyError(f"SEQUENCER needs {name} {side} it, got {got}")


def changes_coordinator(
    header: object,
    src: Address | None,
    me: Address | None,
    view_id: ViewId | None,
    coord: Address | None,
) -> bool:
    """Whether ``header`` (a message's GMS header, from ``src``) is a VIEW that GMS will
    install here after this batch and that names another coordinator than ``coord``: a
    view that follows ours (``view_id``, GMS's `follows`) and holds ``me``, from another
    member (GMS ignores its own, and any other it would not install: that one must not
    hold our coordinator's BCASTs until some later view)."""
    if type(header) is not GmsHeader or header.type != VIEW or header.view is None:
        return False
    view = header.view
    return (
        coord is not None
        and view_id is not None
        and src is not None
        and src != me
        and follows(header, view_id)
        and me in view
        and view.coord != coord
    )
