"""The two forms of the compiled core, for the tests that run the wire codec both ways.

`FORMS` maps "compiled" (where the build made the extension module) and "pure" (always: the
``.py`` the extension is compiled from) to the `_wire_loop` module of that form.
`both_forms` is a module-scoped fixture over them: a test module that imports it (autouse)
runs every test once with each form behind every `WireCodec` it makes, module-scoped so that
Hypothesis tests may use it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import pytest

from triogroups import _compiled
from triogroups.wire import Bundle, WireCodec, WireError

_BUILT = importlib.import_module("triogroups._wire_loop")
COMPILED: ModuleType | None = _BUILT if _compiled.is_compiled(_BUILT) else None
PURE: ModuleType = _compiled.pure("_wire_loop")
FORMS: dict[str, ModuleType] = {"pure": PURE} | ({} if COMPILED is None else {"compiled": COMPILED})

#: For the tests that need both forms at once.
needs_compiled = pytest.mark.skipif(
    COMPILED is None, reason="no compiled core in this checkout (no C compiler at install)"
)


def codec_class(form: ModuleType) -> type[WireCodec]:
    """A `WireCodec` whose per-message loops are ``form``'s."""
    return type(f"{form.__name__}Codec", (WireCodec,), {"_loop": form})


@pytest.fixture(scope="module", params=sorted(FORMS), autouse=False)
def both_forms(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """Every codec the test module makes runs ``request.param``'s loops meanwhile."""
    form = FORMS[request.param]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(WireCodec, "_loop", form)
        yield form


def decode_outcome(decode: Callable[[bytes], Bundle], data: bytes) -> Any:
    """What decoding ``data`` gives: the bundle's every field, or the error's reason; any
    other exception propagates and fails the test (to compare two decoders)."""
    try:
        bundle = decode(data)
    except WireError as exc:
        return ("error", exc.reason)
    return (
        bundle.dest,
        bundle.src,
        [(m.dest, m.src, m.flags, m.headers, m.payload) for m in bundle.messages],
    )
