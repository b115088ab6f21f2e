"""Every protocol survives hostile peers: no exception escapes, and it still delivers after.

Each target builds two real members, T (the target) and H (an honest peer), in a
view with X, a member that never runs and whose address the fuzzer speaks for,
on the lossless link of the test kit's `SansIONetwork`. Hypothesis then feeds T's layer
under test (its `up`, the entry for network input) a mix of:

- forged messages from X and from N, a non-member, with any well-typed header
  values (`tests.fuzz._hostile`): unknown types, out-of-range and huge seqnos,
  billion-long XMIT ranges, strangers' views and digests;
- honest traffic replayed as duplicates, late, in any order (it must be harmless);
- honest traffic mutated in one header field and re-sent as X or N;
- events a layer below derives from peers (discovery answers, suspicions, merges)
  naming strangers, X, T itself and views of any shape, into the layer's `up_event`;
- time passing, so timers run on whatever state the input left.

Nothing speaks for H: a forged message in H's name could legitimately cost H's
real messages (a forged seqno makes the real one a duplicate). Then a view
without X is installed, as failure detection would after X misbehaved, and T
and H run a clean exchange: multicasts (one larger than FRAG's ``frag_size``)
and unicasts both ways, which each must deliver exactly once and in order. A
protocol whose state the fuzz input corrupted (a window moved, a counter gone
negative, a timer lost) fails there; one that raised fails at once.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import _hostile
from tests.fuzz._settings import fuzz_settings
from triogroups import Address, Message, View
from triogroups.events import Event
from triogroups.protocol import Protocol, protocol_class
from triogroups.protocols import ids
from triogroups.testing import SansIOMember, SansIONetwork

T = Address(1, "T")
H = Address(2, "H")
X = Address(3, "X")  # a member that never runs: the fuzzer speaks for it
N = Address(4, "N")  # never in any view
HOSTILE = (X, N)
POOL = (T, X, N)  # addresses hostile headers name; never H
FRAG_SIZE = 600
CLEAN = 12  # messages each member sends in the clean exchange, per kind

_UDP = [
    ("PING", {}),
    ("MERGE3", {}),
    ("FD_ALL3", {}),
    ("VERIFY_SUSPECT", {}),
    ("NAKACK2", {}),
    ("UNICAST3", {}),
    ("STABLE", {}),
    ("GMS", {}),
    ("UFC", {"max_credits": 4000}),
    ("MFC", {"max_credits": 4000}),
    ("FRAG", {"frag_size": FRAG_SIZE}),
]
_TCP = [("TCPPING", {"initial_hosts": "127.0.0.1[7800]", "port_range": 0})] + [
    ("NAKACK2", {"xmit_interval": 0}) if name == "NAKACK2" else (name, props)
    for name, props in _UDP[1:]
]
_UDP_MCAST = [("MCAST", {}) if n == "NAKACK2" else (n, p) for n, p in _UDP if n != "MFC"]
_UDP_TOTAL = [*_UDP[:6], ("SEQUENCER", {}), *_UDP[6:]]  # SEQUENCER above UNICAST3

#: target id -> (the protocol fed hostile input, its stack bottom first)
TARGETS: dict[str, tuple[str, list[tuple[str, dict[str, object]]]]] = {
    "UNICAST2": ("UNICAST2", [("UNICAST2", {})]),
    "UNICAST3": ("UNICAST3", [("UNICAST3", {})]),
    "NAKACK2": ("NAKACK2", [("NAKACK2", {})]),
    "NAKACK2-no-xmit": ("NAKACK2", [("NAKACK2", {"xmit_interval": 0})]),
    "MCAST": ("MCAST", [("MCAST", {})]),
    "STABLE": ("STABLE", [("NAKACK2", {}), ("STABLE", {})]),
    "GMS": ("GMS", _UDP),
    "MERGE3": ("MERGE3", _UDP),
    "FD_ALL3": ("FD_ALL3", _UDP),
    "VERIFY_SUSPECT": ("VERIFY_SUSPECT", _UDP),
    "FRAG": ("FRAG", _UDP),
    "UFC": ("UFC", _UDP),
    "MFC": ("MFC", _UDP),
    "PING": ("PING", _UDP),
    "TCPPING": ("TCPPING", _TCP),
    "NAKACK2-in-tcp": ("NAKACK2", _TCP),
    "MCAST-in-udp-mcast": ("MCAST", _UDP_MCAST),
    "GMS-in-udp-mcast": ("GMS", _UDP_MCAST),
    "SEQUENCER": ("SEQUENCER", _UDP_TOTAL),
}


def _layers(spec: list[tuple[str, dict[str, object]]]) -> list[Protocol]:
    return [protocol_class(name)(**props) for name, props in spec]


class Scenario:
    """T and H (running) in a view with X; the target layer's index at T."""

    def __init__(self, target: str) -> None:
        name, spec = TARGETS[target]
        self.net = SansIONetwork(cluster="fuzz")
        self.t = self.net.add(T, _layers(spec))
        self.h = self.net.add(H, _layers(spec))
        self.inject = any(n == "GMS" for n, _ in spec)
        self.no_xmit = any(n == "NAKACK2" and p.get("xmit_interval") == 0 for n, p in spec)
        self.index = [layer.name for layer in self.t.layers].index(name)
        self.ids = sorted({layer.id for layer in self.t.layers if layer.id})
        self.net.install(View.create(T, 1, [T, H, X]), inject=self.inject)
        self.net.record = True
        self._exchange("warm", count=3)
        self.net.run(3.0)
        self.net.record = False
        self.corpus = [m for _, m in self.net.wire]

    def _exchange(self, tag: str, count: int) -> dict[tuple[Address, Address, str], list[bytes]]:
        """T and H each multicast and unicast ``count`` messages (one large enough for
        FRAG to split); returns what each receiver must deliver from each sender, per
        stream ("m" multicasts, "u" unicasts: each is ordered, the two not with each other)."""
        expected: dict[tuple[Address, Address, str], list[bytes]] = {}
        for me, peer in ((self.t, self.h), (self.h, self.t)):
            name = me.address.name
            mcasts = [f"{tag}-{name}-m{i}".encode() for i in range(count)]
            mcasts[count // 2] += b"." * (3 * FRAG_SIZE)
            ucasts = [f"{tag}-{name}-u{i}".encode() for i in range(count)]
            me.send_batch([Message(None, p) for p in mcasts])
            me.send_batch([Message(peer.address, p) for p in ucasts])
            expected[(me.address, me.address, "m")] = mcasts
            expected[(me.address, peer.address, "m")] = mcasts
            expected[(me.address, peer.address, "u")] = ucasts
        return expected

    def feed(self, actions: list[tuple[str, object]]) -> None:
        for kind, arg in actions:
            if kind == "time":
                assert isinstance(arg, float)
                self.net.run(arg)
            elif kind == "event":  # what a layer below derives from peers, hostile
                assert isinstance(arg, Event)
                self.t.up_event_at(self.index, arg)
            elif kind == "replay":  # honest traffic again, as the network may duplicate it
                assert isinstance(arg, Message)
                self.t.up_at(0, [arg.copy()])
            else:
                assert isinstance(arg, Message)
                msg = self.net.wire_round_trip(arg, arg.src or N)
                if msg is not None:  # what the codec refuses never reaches a protocol
                    before = self._trace()
                    self.t.up_at(self.index, [msg])
                    assert self._trace() != before, f"{msg!r} dropped without a count in stats()"
            self.net.deliver_all()

    def _trace(self) -> str:
        """What shows T handled a message: its layers' stats, what it delivered and sent."""
        stats = [layer.stats() for layer in self.t.layers]
        seen = (stats, len(self.t.delivered), len(self.t.events), self.net.in_flight())
        return json.dumps(seen, default=repr, sort_keys=True)

    def clean_exchange(self) -> None:
        """Drop X from the view, then T and H must deliver each other everything, once, in
        order."""
        newest = max((n.view.view_id.id for n in (self.t, self.h) if n.view), default=1)
        self.net.install(View.create(T, max(newest, 1) + 1, [T, H]), inject=self.inject)
        self.net.run(1.0)
        start = {n.address: len(n.delivered) for n in (self.t, self.h)}
        expected = self._exchange("clean", CLEAN)
        for _ in range(60):
            self.net.run(1.0)
            if all(
                _got(self.net.members[r], start, s, kind) == want
                for (s, r, kind), want in expected.items()
            ):
                break
        for (sender, receiver, kind), want in expected.items():
            got = _got(self.net.members[receiver], start, sender, kind)
            assert got == want, f"{receiver} delivered from {sender}: {got} != {want}"
        for node in (self.t, self.h):
            assert not node.blocked(), f"{node.address} still holds back sends"
            for layer in node.layers:
                msgpack.packb(layer.stats(), default=repr)


def _got(node: SansIOMember, start: dict[Address, int], sender: Address, kind: str) -> list[bytes]:
    """What ``node`` delivered from ``sender`` in the clean exchange, in one stream."""
    prefix = f"clean-{sender.name}-{kind}".encode()
    return [
        m.payload
        for m in node.delivered[start[node.address] :]
        if m.src == sender and m.payload.startswith(prefix)
    ]


def _scrub(header: Any) -> Any:
    """``header`` with H named nowhere (X instead): re-sent by X, an honest header that
    names H (a retransmission of H's message, say) would forge H's traffic. A bare
    seqno (an int) names nobody."""
    if type(header) is int:
        return header
    return header._replace(**{f: X for f, v in header._asdict().items() if v == H})


def _drops_h(msg: Message) -> bool:
    """Whether ``msg`` is a GMS message whose view has T and not H (from X, a member).

    Without retransmission (NAKACK2 ``xmit_interval = 0``) a view that drops H, then a
    plain view that brings it back, leave T's window for H behind H's seqnos, and by
    design nothing repairs that (a rejoin goes through a merge and its digest): so for
    those stacks the fuzzer does not make a member forge H out of T's view.
    """
    hdr = msg.headers.get(ids.GMS)
    view = getattr(hdr, "view", None)
    return view is not None and T in view and H not in view


def _actions(scenario: Scenario) -> st.SearchStrategy[list[tuple[str, object]]]:
    forged = _hostile.messages(scenario.ids, HOSTILE, POOL, T).map(lambda m: ("forged", m))
    if scenario.no_xmit:
        forged = forged.filter(lambda action: not _drops_h(action[1]))
    time = st.sampled_from([0.05, 0.5, 1.5, 6.0]).map(lambda d: ("time", d))
    events = _hostile.peer_events(POOL).map(lambda e: ("event", e))
    options = [forged, forged, time, events]
    if scenario.corpus:
        honest = st.sampled_from(scenario.corpus)
        options.append(honest.map(lambda m: ("replay", m)))

        @st.composite
        def mutate(draw: st.DrawFn) -> tuple[str, object]:
            msg = draw(_hostile.mutated(draw(honest), POOL))
            msg.src = draw(st.sampled_from(HOSTILE))
            msg.headers = {pid: _scrub(h) for pid, h in msg.headers.items()}
            if scenario.no_xmit and _drops_h(msg):
                return ("time", 0.05)
            return ("mutated", msg)

        options.append(mutate())
    return st.lists(st.one_of(options), min_size=1, max_size=25)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzz_protocol_drops_hostile_input_and_still_delivers_after(target: str) -> None:
    """Hostile, duplicated and mutated input to one layer raises nothing, and a clean
    exchange afterwards delivers every message exactly once and in order."""

    @fuzz_settings(25)
    @given(st.data())
    def run(data: st.DataObject) -> None:
        scenario = Scenario(target)
        scenario.feed(data.draw(_actions(scenario)))
        scenario.net.run(2.0)
        scenario.clean_exchange()

    run()
