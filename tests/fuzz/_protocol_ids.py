"""Every header the protocols register, loaded once, for the wire and atheris targets."""

from __future__ import annotations

import importlib
import pkgutil

import triogroups.protocols
from triogroups.wire import header_type


def registered_ids() -> list[int]:
    """The protocol ids with a header the package registers, after importing every protocol
    module. Headers a test module registered (its own ids, field types the hostile value
    strategies need not know) are left out, whichever test modules were imported first."""
    for mod in pkgutil.walk_packages(triogroups.protocols.__path__, "triogroups.protocols."):
        importlib.import_module(mod.name)
    return [
        pid
        for pid in range(1, 1 << 16)
        if (cls := header_type(pid)) is not None and cls.__module__.startswith("triogroups.")
    ]
