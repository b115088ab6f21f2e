"""Coverage-guided fuzzing with atheris (optional: runs only where atheris is installed).

    python tests/fuzz/atheris_targets.py wire -atheris_runs=1000000
    python tests/fuzz/atheris_targets.py protocols -max_total_time=600

``wire``: `WireCodec.decode` on any bytes must return a bundle or raise `WireError`.
``protocols``: a bundle that decodes goes to ``up()`` of a fresh, started member of
every protocol (in a view with the bundle's source), then through ``tick``; nothing
may raise. Without a corpus directory on the command line, a seed corpus of valid
bundles (every registered header) is written to a temporary directory, so libFuzzer
starts from bundles the codec accepts and mutates from there. Other arguments go to
libFuzzer (``-help=1``). atheris is not a dependency of triogroups:
``pip install atheris``; tests/fuzz/test_fuzz_atheris.py runs both targets briefly
when it is installed and is skipped otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["triogroups"]):
    from triogroups import Address, Message, View
    from triogroups._wire_headers import _INT_HEADERS
    from triogroups.events import ViewChange
    from triogroups.protocol import Protocol, protocol_class
    from triogroups.wire import WireCodec, WireError, header_type

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.fuzz._protocol_ids import registered_ids

CODEC = WireCodec("fuzz")
ME = Address(1, "T")
PEER = Address(2, "H")
PROTOCOLS = [
    ("UNICAST2", {}),
    ("UNICAST3", {}),
    ("NAKACK2", {}),
    ("NAKACK2", {"xmit_interval": 0}),
    ("MCAST", {}),
    ("STABLE", {}),
    ("GMS", {}),
    ("MERGE3", {}),
    ("FD_ALL3", {}),
    ("VERIFY_SUSPECT", {}),
    ("FRAG", {"frag_size": 600}),
    ("UFC", {}),
    ("MFC", {}),
    ("PING", {}),
    ("TCPPING", {"initial_hosts": "127.0.0.1[7800]"}),
]


def wire(data: bytes) -> None:
    with contextlib.suppress(WireError):
        CODEC.decode(data)


def _member(name: str, props: dict[str, object], src: Address) -> Protocol:
    proto = protocol_class(name)(**props)
    proto.start(ME, "fuzz", 0.0)
    members = [ME, PEER] if src in (ME, PEER) else [ME, PEER, src]
    proto.down_event(ViewChange(View.create(ME, 1, members)), 0.0)
    return proto


def protocols(data: bytes) -> None:
    try:
        bundle = CODEC.decode(data)
    except WireError:
        return
    for name, props in PROTOCOLS:
        proto = _member(name, props, bundle.src)
        proto.up([m.copy() for m in bundle.messages], 1.0)
        proto.tick(max(1.0, min(proto.next_deadline(), 1e9)))
        proto.stats()


def _seed_corpus() -> str:
    directory = tempfile.mkdtemp(prefix="triogroups-atheris-")
    for i, pid in enumerate(registered_ids()):
        cls = header_type(pid)
        assert cls is not None
        defaults = dict(cls._field_defaults)  # type: ignore[attr-defined]
        for kind in range(0, 6):
            try:
                values = {f: defaults.get(f, 1) for f in cls._fields}  # type: ignore[attr-defined]
                if "type" in values:
                    values["type"] = kind
                hdr = cls(**values)
                msg = Message(None, b"seed", src=PEER, headers={pid: hdr})
                data = CODEC.encode(None, PEER, [msg])
                CODEC.decode(data)
            except (ValueError, TypeError, WireError):
                continue
            Path(directory, f"seed-{i}-{kind}").write_bytes(data)
        if pid in _INT_HEADERS:  # a bare seqno: NAKACK2's and MCAST's MSG
            msg = Message(None, b"seed", src=PEER, headers={pid: 1})
            Path(directory, f"seed-{i}-int").write_bytes(CODEC.encode(None, PEER, [msg]))
    return directory


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("wire", "protocols"):
        sys.exit("usage: atheris_targets.py wire|protocols [libFuzzer options] [corpus dirs]")
    target = wire if sys.argv[1] == "wire" else protocols
    logging.disable(logging.CRITICAL)  # dropped input is logged rate-limited: noise here
    args = [sys.argv[0], *sys.argv[2:]]
    if not any(not a.startswith("-") for a in args[1:]):
        args.append(_seed_corpus())
    atheris.Setup(args, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
