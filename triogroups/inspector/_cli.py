"""``triogroups probe``: every member's answer once, as tables or as JSON.

Exit status: 0 when at least one member answered (and, with ``--set`` or
``--reset``, every answering member carried it out), 1 when none answered within
``--timeout`` or a member refused the change (each refusal is a line on stderr),
2 for bad arguments (a ``--set`` without ``=``, a port out of range, a
``--target`` host that does not resolve, an unreadable secret file), 130 or 143
when Ctrl-C or SIGTERM stopped it. Standard output holds only the tables, or
with ``--json`` only the JSON list; whatever else is said goes to stderr.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import socket
from functools import partial
from typing import Any

from rich.console import Console
from rich.table import Table

from triogroups._cli_exit import EXIT_STATUS, Stopped, fail, run_stoppable, stopped
from triogroups.inspector._probe import probe
from triogroups.transports.base import SECRET_ENV

__all__ = ["add_probe_parser", "filter_answers", "run_probe"]

_EXAMPLE = """examples:
  triogroups probe                              every member of every cluster on this host
  triogroups probe --cluster demo --json        one cluster's answers for scripts
  triogroups probe --cluster demo --protocol NAKACK2 --member A
  triogroups probe --cluster demo --reset       zero every counter, then report
  triogroups probe --cluster demo --set NAKACK2.xmit_interval=250ms

The demo prints its cluster name (triogroups demo --cluster demo chooses it).

{exit_status}"""


def add_probe_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``probe`` subcommand to the ``triogroups`` parser."""
    parser = sub.add_parser(
        "probe",
        help="ask running members for their view, stack and counters",
        description="Send one probe to every member that listens (UDP stacks by multicast,\n"
        "TCP stacks over TCP) and print each answer once.",
        epilog=_EXAMPLE.format(exit_status=EXIT_STATUS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--cluster", help="only this cluster (needed with a shared secret)")
    parser.add_argument(
        "--member", action="append", default=[], help="only this member (name or id prefix)"
    )
    parser.add_argument(
        "--protocol", action="append", default=[], help="show only this protocol's stats"
    )
    parser.add_argument("--json", action="store_true", help="one JSON list of the answers")
    parser.add_argument(
        "--timeout", type=float, default=2.0, help="seconds to wait for answers (default 2)"
    )
    parser.add_argument(
        "--expect", type=int, default=None, help="stop waiting once this many members answered"
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--reset", action="store_true", help="zero the counters, then report")
    what.add_argument(
        "--set",
        metavar="PROTOCOL.PROPERTY=VALUE",
        help="change a property at run time, e.g. NAKACK2.xmit_interval=250ms",
    )
    parser.add_argument(
        "--secret-file", help=f"the cluster's shared secret (default: ${SECRET_ENV} if set)"
    )
    parser.add_argument("--bind", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--addr", default="224.0.75.75", help="diagnostics multicast group")
    parser.add_argument("--port", type=int, default=7500, help="diagnostics port (default 7500)")
    parser.add_argument(
        "--port-range", type=int, default=50, help="TCP ports tried above --port (default 50)"
    )
    parser.add_argument("--ttl", type=int, default=0, help="multicast TTL (default 0: this host)")
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="probe this TCP diagnostics port (repeatable; default: --bind, --port..+range)",
    )


def _set_request(text: str) -> tuple[str, str, Any]:
    """``PROTOCOL.PROPERTY=VALUE``; the value as JSON when it parses, else as text."""
    target, sep, raw = text.partition("=")
    protocol, dot, key = target.partition(".")
    if not sep or not dot or not protocol or not key:
        raise ValueError(f"--set must be PROTOCOL.PROPERTY=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return protocol, key, value


def _target(text: str) -> tuple[str, int]:
    """``HOST:PORT`` with a host that resolves (a typo is refused, not probed in vain)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--target must be HOST:PORT, got {text!r}")
    try:
        socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise ValueError(f"--target {text!r}: host {host!r} does not resolve") from None
    return host, int(port)


def _check_values(args: argparse.Namespace) -> None:
    """Values out of their range, named with their value (ValueError)."""
    if args.timeout <= 0:
        raise ValueError(f"--timeout must be > 0, got {args.timeout:g}")
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be a port (1-65535), got {args.port}")
    if args.port_range < 0:
        raise ValueError(f"--port-range must be >= 0, got {args.port_range}")
    if not 0 <= args.ttl <= 255:
        raise ValueError(f"--ttl must be in 0..255, got {args.ttl}")
    if args.expect is not None and args.expect < 1:
        raise ValueError(f"--expect must be >= 1, got {args.expect}")
    try:
        multicast = ipaddress.IPv4Address(args.addr).is_multicast
    except ValueError:
        multicast = False
    if not multicast:
        raise ValueError(f"--addr must be an IPv4 multicast address, got {args.addr!r}")


def _secret(args: argparse.Namespace) -> bytes | None:
    if args.secret_file:
        try:
            with open(args.secret_file, "rb") as f:
                return f.read().strip()
        except OSError as exc:
            raise ValueError(f"--secret-file {args.secret_file!r}: {exc.strerror}") from None
    value = os.environ.get(SECRET_ENV)
    return value.encode() if value and args.cluster else None


def filter_answers(
    answers: list[dict[str, Any]], members: list[str], protocols: list[str]
) -> list[dict[str, Any]]:
    """Only ``members`` (names or address prefixes) and only ``protocols``' stats
    (case-insensitive); empty lists keep everything."""
    if members:
        answers = [
            a
            for a in answers
            if any(m == a.get("name") or str(a.get("address", "")).startswith(m) for m in members)
        ]
    if protocols:
        wanted = {p.upper() for p in protocols}
        answers = [
            {**a, "stats": {k: v for k, v in a.get("stats", {}).items() if k.upper() in wanted}}
            for a in answers
        ]
    return answers


def run_probe(args: argparse.Namespace, console: Console) -> int:
    """Probe, print, and say by the exit status whether anybody answered (and carried out
    a ``--set`` or ``--reset``)."""
    options: dict[str, Any] = {}
    try:
        _check_values(args)
        if args.set:
            protocol, key, value = _set_request(args.set)
            options = {"request": "set", "protocol": protocol, "property": key, "value": value}
        elif args.reset:
            options = {"request": "reset"}
        secret = _secret(args)
        targets = [_target(text) for text in args.target] or None
    except ValueError as exc:
        return fail("probe", str(exc))
    try:
        answers = _run_probe(args, secret, {**options, "targets": targets})
    except OSError as exc:
        return fail("probe", f"cannot probe from --bind {args.bind}: {exc.strerror or exc}")
    if isinstance(answers, Stopped):
        return stopped("probe", answers)
    answers = filter_answers(answers, args.member, args.protocol)
    if args.json:
        print(json.dumps(answers, indent=1, sort_keys=True), flush=True)
    elif answers:
        _print_tables(console, answers)
    if not answers:
        where = f"cluster {args.cluster!r}" if args.cluster else "any cluster"
        return fail("probe", f"no member of {where} answered within {args.timeout:g}s", 1)
    refused = [a for a in answers if a.get("applied") is False]
    for answer in refused:
        change = f"--set {args.set}" if args.set else "--reset"
        fail(
            "probe",
            f"{answer.get('name')}@{answer.get('cluster')} refused {change}: {answer['error']}",
        )
    return 1 if refused else 0


def _run_probe(
    args: argparse.Namespace, secret: bytes | None, options: dict[str, Any]
) -> list[dict[str, Any]] | Stopped:
    return run_stoppable(
        partial(
            probe,
            cluster=args.cluster,
            timeout=args.timeout,
            members=args.member,
            secret=secret,
            expect=args.expect,
            bind_addr=args.bind,
            diagnostics_addr=args.addr,
            diagnostics_port=args.port,
            port_range=args.port_range,
            ttl=args.ttl,
            **options,
        )
    )


def _print_tables(console: Console, answers: list[dict[str, Any]]) -> None:
    """One table of members, then one per protocol: a row per counter, a column per member."""
    members = Table(title="members")
    for column in ("cluster", "member", "address", "pid", "view", "coord", "view members", "note"):
        members.add_column(column)
    for a in answers:
        view = a.get("view") or {}
        members.add_row(
            str(a.get("cluster")),
            str(a.get("name")),
            str(a.get("address", ""))[:8],
            str(a.get("pid")),
            str(view.get("id", "-")),
            str(view.get("coord", "-")),
            ", ".join(view.get("members", [])),
            str(a.get("error", "")),
        )
    console.print(members, highlight=False)
    protocols = list(dict.fromkeys(p for a in answers for p in a.get("stats", {})))
    for protocol in protocols:
        table = Table(title=protocol)
        table.add_column("counter", no_wrap=True)
        for a in answers:
            table.add_column(f"{a.get('name')}@{a.get('cluster')}", overflow="fold")
        keys = list(dict.fromkeys(k for a in answers for k in a.get("stats", {}).get(protocol, {})))
        for key in keys:
            cells = [_cell(a.get("stats", {}).get(protocol, {}).get(key, "")) for a in answers]
            table.add_row(key, *cells)
        console.print(table, highlight=False)


def _cell(value: Any) -> str:
    if isinstance(value, dict | list):
        text = json.dumps(value, sort_keys=True)
        return text if len(text) <= 60 else text[:57] + "..."
    return str(value)
