"""The compiled core and the pure-Python source it is compiled from agree (issue 43).

`triogroups._wire_loop` is built by Cython into an extension module when a C compiler is
there; ``TRIOGROUPS_PURE_PYTHON=1`` (or no compiled module) runs its ``.py``. Both forms
must decode any bytes to the same bundle or the same `WireError` reason (and raise nothing
else), read each other's bundles, and so talk to each other: a group whose
members run different forms delivers as a group of one form does. The wire tests
(tests/test_wire*.py) run whole with each form as well (`tests._forms.both_forms`).
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests._forms import COMPILED, PURE, codec_class, decode_outcome, needs_compiled
from tests._kinds import examples
from triogroups import Address, Flag, Message, _compiled
from triogroups._rpc._header import RpcHeader
from triogroups.protocols import ids
from triogroups.protocols.unicast3._common import Unicast3Header
from triogroups.testing import open_cluster
from triogroups.transports.base import Transport
from triogroups.wire import WIRE_VERSION, WireCodec

ROOT = Path(__file__).resolve().parent.parent
A = Address.random("A")
B = Address.random("B")
PREFIX = b"TG" + bytes([WIRE_VERSION, 0, 8]) + b"formtest\x00"


def _codecs() -> tuple[WireCodec, WireCodec]:
    assert COMPILED is not None
    return codec_class(COMPILED)("formtest"), codec_class(PURE)("formtest")


def _outcome(codec: WireCodec, data: bytes) -> Any:
    return decode_outcome(codec.decode, data)


@needs_compiled
@settings(max_examples=examples(500))
@given(st.binary(max_size=200))
def test_both_forms_decode_arbitrary_bodies_alike(body: bytes) -> None:
    """Any bytes after a valid prefix: the same bundle or the same WireError reason."""
    compiled, pure = _codecs()
    data = PREFIX + body
    assert _outcome(compiled, data) == _outcome(pure, data)


_leaves = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=8) | st.text()
)
_values = st.recursive(
    _leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_leaves, inner, max_size=3),
    max_leaves=8,
)
_header_ids = st.sampled_from([ids.NAKACK2, ids.MCAST, ids.UNICAST3, ids.RPC, ids.APP_SEQNO, 7])
_entries = st.lists(
    st.tuples(
        st.sampled_from([0, 1, 64, 255, 256, -1]) | _values,
        st.none() | st.dictionaries(_header_ids | _leaves, _values, max_size=3),
        st.binary(max_size=16) | _values,
    ).map(list)
    | _values,
    max_size=5,
)


@needs_compiled
@settings(max_examples=examples(200))
@given(st.sampled_from([None, B, "B"]), st.sampled_from([A, None, 3]), _entries)
def test_both_forms_decode_msgpack_of_any_shape_alike(dest: Any, src: Any, entries: Any) -> None:
    """Well-formed msgpack of any shape, with real protocol ids among the header keys:
    the same messages or the same WireError reason."""
    compiled, pure = _codecs()
    body = msgpack.packb([dest, src, entries], default=pure._default, use_bin_type=True)
    data = PREFIX + body
    assert _outcome(compiled, data) == _outcome(pure, data)


_headers = st.dictionaries(
    _header_ids.filter(lambda pid: pid != 7),
    st.integers(0, 2**40),
    max_size=2,
).map(
    lambda hdrs: {
        pid: (
            Unicast3Header(0, seqno, 3, seqno == 1)
            if pid == ids.UNICAST3
            else RpcHeader(1, seqno, "ping")
            if pid == ids.RPC
            else seqno
        )
        for pid, seqno in hdrs.items()
    }
)
_messages = st.lists(
    st.builds(
        Message,
        st.sampled_from([None, B]),
        st.binary(max_size=64),
        src=st.sampled_from([None, A, B]),
        flags=st.sampled_from([0, 1, 64, 128, 255]),
        headers=_headers,
    ),
    max_size=6,
)


@needs_compiled
@settings(max_examples=examples(300))
@given(st.sampled_from([None, B]), _messages)
def test_both_forms_read_each_others_bundles(dest: Address | None, msgs: list[Message]) -> None:
    """What either codec encodes (encoding has one form) both decode to the messages sent."""
    compiled, pure = _codecs()
    data = compiled.encode(dest, A, msgs)
    assert pure.encode(dest, A, msgs) == data
    assert _outcome(pure, data) == _outcome(compiled, data)
    decoded = pure.decode(data).messages
    assert [(m.src or A, m.flags, m.headers, m.payload) for m in msgs] == [
        (m.src, m.flags, m.headers, m.payload) for m in decoded
    ]


_sources = st.sampled_from([None, A, B, Address(A.uuid, "A"), Address(A.uuid, "renamed")])


@needs_compiled
@settings(max_examples=examples(300))
@given(
    st.lists(
        st.builds(
            Message,
            st.sampled_from([None, B]),
            st.binary(max_size=16),
            src=_sources,
            flags=st.sampled_from([0, 1, 128]),
            headers=st.sampled_from([{}, {ids.NAKACK2: 7}, {ids.RPC: RpcHeader(1, 2, "x")}]),
        ),
        max_size=6,
    )
)
def test_both_forms_encode_the_same_entries(msgs: list[Message]) -> None:
    """The compiled encode loop reads `Message`'s slots from the object (the layout its
    .pxd declares): the same entries as the Python loop, a source equal to the bundle's
    (the same address object or not) left out, any other kept as a fourth item."""
    assert COMPILED is not None
    assert COMPILED.encode_entries(msgs, A) == PURE.encode_entries(msgs, A)


_SCAN_BUILT = importlib.import_module("triogroups._layer._scan")
SCAN_COMPILED = _SCAN_BUILT if _compiled.is_compiled(_SCAN_BUILT) else None
SCAN_PURE = _compiled.pure("_layer._scan")
_SCANS = ("none_carries", "unicasts_without", "multicasts_without")
_batches = st.lists(
    st.builds(
        Message,
        st.sampled_from([None, A, B]),
        st.just(b""),
        headers=st.dictionaries(st.sampled_from([ids.NAKACK2, ids.GMS, 7, "x"]), st.none()),
    ),
    max_size=8,
)


@pytest.mark.skipif(SCAN_COMPILED is None, reason="no compiled core in this checkout")
@settings(max_examples=examples(300))
@given(_batches, st.sampled_from([ids.NAKACK2, ids.GMS, 7, 8]))
def test_both_forms_of_the_layer_hosts_scans_agree(batch: list[Message], pid: int) -> None:
    """`_layer._scan`, which the host runs over a batch at every layer that may pass it on
    (`_ways.passes`), reads `Message`'s slots from the declared layout when compiled: each
    scan answers as its pure form and as the plain rule it stands for, for any batch."""
    rules = {
        "none_carries": all(pid not in m.headers for m in batch),
        "unicasts_without": all(m.dest is not None and pid not in m.headers for m in batch),
        "multicasts_without": all(m.dest is None and pid not in m.headers for m in batch),
    }
    for name in _SCANS:
        pure = getattr(SCAN_PURE, name)(batch, pid)
        assert getattr(SCAN_COMPILED, name)(batch, pid) is pure is rules[name], name


_BUNDLE_BUILT = importlib.import_module("triogroups.transports._bundle_loop")
BUNDLE_COMPILED = _BUNDLE_BUILT if _compiled.is_compiled(_BUNDLE_BUILT) else None
BUNDLE_PURE = _compiled.pure("transports._bundle_loop")
_outgoing = st.lists(
    st.builds(
        Message,
        st.sampled_from([None, A, B, Address(A.uuid, "renamed")]),
        st.binary(max_size=40),
        flags=st.sampled_from([0, Flag.DONT_LOOPBACK, Flag.DONT_BUNDLE, Flag.OOB, 0x1FF]),
        headers=st.dictionaries(st.integers(1, 99), st.integers(0, 9), max_size=3),
    ),
    max_size=12,
)


@pytest.mark.skipif(BUNDLE_COMPILED is None, reason="no compiled core in this checkout")
@settings(max_examples=examples(300))
@given(_outgoing, st.integers(0, 300))
def test_both_forms_of_the_bundlers_loops_agree(msgs: list[Message], max_size: int) -> None:
    """`transports._bundle_loop`, whose compiled form reads and stamps `Message`'s slots in
    the declared layout: `route` groups the same messages by the same destinations, picks
    out the same local ones and stamps every source, and `pack` makes the same bundles of
    each group, for any queue (a unicast to the sender under another name too)."""
    results = []
    for form in (BUNDLE_COMPILED, BUNDLE_PURE):
        assert form is not None
        batch = [m.copy() for m in msgs]
        index = {id(m): i for i, m in enumerate(batch)}
        by_dest, local = form.route(batch, A)
        assert all(m.src is A for m in batch)
        results.append(
            (
                {dest: [index[id(m)] for m in group] for dest, group in by_dest.items()},
                [index[id(m)] for m in local],
                [
                    [[index[id(m)] for m in bundle] for bundle in form.pack(group, max_size)]
                    for group in by_dest.values()
                ],
            )
        )
    assert results[0] == results[1]


def test_the_transports_run_the_bundlers_loops_of_the_chosen_form() -> None:
    """The bundler re-exports `route` and `pack` of the form this process runs."""
    pure = _forms_in_a_new_process("1")
    assert "False True triogroups.transports._bundle_loop_pure" in pure, pure
    expected = "False" if BUNDLE_COMPILED is None else "True"
    default = _forms_in_a_new_process(None)
    assert f"{expected} True triogroups.transports._bundle_loop" in default, default


def test_the_layer_host_runs_the_scans_of_the_chosen_form() -> None:
    """`_ways.passes` runs the compiled scans where they were built, the ``.py`` with
    ``TRIOGROUPS_PURE_PYTHON=1``: the same choice as the wire codec's."""
    pure = _forms_in_a_new_process("1")
    assert "False triogroups._layer._scan_pure" in pure, pure
    expected = "False" if SCAN_COMPILED is None else "True"
    default = _forms_in_a_new_process(None)
    assert f"{expected} triogroups._layer._scan" in default, default


def test_message_layout_is_the_one_the_compiled_core_declares() -> None:
    """``_message_layout.pxd`` declares `Message` as five object pointers after the object
    header, in the order of its sorted slots, which is how CPython stores them; the
    compiled loops that cimport it (the codec's encode loop, the layer host's scans, the
    bundler's loops) read the slots from there. A slot added to `Message` (or a
    ``__weakref__``, a ``__dict__``) must be declared there too: a compiled module refuses
    to import with a size that differs, and this test says why."""
    pxd = (ROOT / "triogroups" / "_message_layout.pxd").read_text()
    declared = re.findall(r"^ +PyObject \*(\w+);$", pxd, flags=re.MULTILINE)
    fields = re.findall(r"^ +cdef object (\w+)$", pxd, flags=re.MULTILINE)
    assert tuple(declared) == tuple(fields) == tuple(sorted(Message.__slots__)), (
        "Message's slots and the layout _message_layout.pxd declares differ"
    )
    users = {
        p.name for p in (ROOT / "triogroups").rglob("*.pxd") if "_message_layout" in p.read_text()
    }
    assert {"_wire_loop.pxd", "_scan.pxd", "_bundle_loop.pxd"} <= users
    assert Message.__bases__ == (object,)
    assert Message.__basicsize__ == object.__basicsize__ + len(declared) * struct.calcsize("P")


def _python(code: str, **env: str) -> str:
    """Run ``code`` in a new interpreter on this checkout; its stdout and stderr."""
    environ = {k: v for k, v in os.environ.items() if k != _compiled.PURE_ENV}
    environ["PYTHONPATH"] = str(ROOT)
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environ | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


#: What a new interpreter runs to say which form each compiled-core module took: the wire
#: codec's (with its start-up line), the bundler's loops and the layer host's scans. One
#: process per setting of `_compiled.PURE_ENV` answers the tests of all three (`functools.cache`
#: in each pytest worker): each new interpreter costs 0.6 s of CPU importing triogroups.
_SAY_FORMS = (
    "import logging; logging.basicConfig(level=logging.INFO, format='%(message)s')\n"
    "import triogroups.wire as wire, triogroups._compiled as c\n"
    "import triogroups.transports._bundler as b, triogroups._layer._ways as w\n"
    "print(c.is_compiled(wire.LOOP), wire.LOOP.__name__)\n"
    "print(c.is_compiled(b.LOOP), b.route is b.LOOP.route, b.LOOP.__name__)\n"
    "print(c.is_compiled(w.SCAN), w.SCAN.__name__)"
)
FORM_LINES = 3  # the lines `_SAY_FORMS` prints, last in its output


@functools.cache
def _forms_in_a_new_process(pure: str | None) -> str:
    """`_SAY_FORMS`'s output, run with ``TRIOGROUPS_PURE_PYTHON`` set to ``pure`` (None:
    unset)."""
    return _python(_SAY_FORMS) if pure is None else _python(_SAY_FORMS, TRIOGROUPS_PURE_PYTHON=pure)


def test_pure_switch_runs_the_python_source_and_says_so_at_start_up() -> None:
    """``TRIOGROUPS_PURE_PYTHON=1``: the codec runs the ``.py``, and the one start-up line
    says so; without it, the compiled core where one was built."""
    pure = _forms_in_a_new_process("1")
    assert "False triogroups._wire_loop_pure" in pure, pure
    assert pure.count("wire codec: pure Python (TRIOGROUPS_PURE_PYTHON is set)") == 1, pure
    default = _forms_in_a_new_process(None)
    if COMPILED is None:
        assert "False triogroups._wire_loop\n" in default, default
        assert "wire codec: pure Python (no compiled core was built" in default, default
    else:
        assert "True triogroups._wire_loop\n" in default, default
        assert default.count("wire codec: compiled core (Cython)") == 1, default
    off = _forms_in_a_new_process("0")
    assert off.splitlines()[-FORM_LINES:] == default.splitlines()[-FORM_LINES:], off


def test_version_names_the_form_of_the_core() -> None:
    """``triogroups --version`` says the version and which form of the core runs."""
    out = _python("from triogroups.cli import main; main(['--version'])")
    form = "compiled core (Cython)" if COMPILED is not None else "pure Python (no compiled"
    assert out.startswith("triogroups "), out
    assert f"wire codec: {form}" in out, out


@pytest.fixture
def pure_member_a(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Member A's transport codes bundles with the pure-Python loops, the others with the
    compiled core; yields the names that got each, in the order they were made."""
    made: list[str] = []
    plain = Transport.make_codec

    def make_codec(self: Transport, max_size: int) -> WireCodec:
        codec = plain(self, max_size)
        form: ModuleType = PURE if self.local_address.name == "A" else COMPILED  # type: ignore[assignment]
        codec.__class__ = codec_class(form)
        made.append(f"{self.local_address.name}:{_compiled.is_compiled(form)}")
        return codec

    monkeypatch.setattr(Transport, "make_codec", make_codec)
    yield made


@needs_compiled
@pytest.mark.parametrize("stack", ["sim", "udp"])
async def test_a_group_of_pure_and_compiled_members_delivers_every_message(
    stack: str, pure_member_a: list[str], autojump_clock: object
) -> None:
    """Member A runs the pure-Python loops, B and C the compiled core (the simulated
    network encodes and decodes every bundle): they form one group through GMS and every
    member delivers every multicast and unicast, in order, exactly once."""
    async with open_cluster(3, stack, seed=43) as cluster:
        a, b, c = cluster.members
        for i in range(50):
            await a.send(f"a{i}".encode())
            await b.send(f"b{i}".encode())
            await c.send(f"c{i}".encode(), to=a.address)
        await cluster.wait_until_delivered(timeout=60)
    assert {"A:False", "B:True", "C:True"} <= set(pure_member_a), pure_member_a
