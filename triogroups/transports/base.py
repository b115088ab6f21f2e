"""The transport contract: the one layer that does I/O.

A transport is the bottom of a stack. It is configured like any protocol
(typed properties, a registered name, `stats`), but instead of handlers the
host runs `serve`: it sends every batch that comes down from the layer above
and pushes every batch it receives up, as one batch per wake-up. It never
interprets protocol headers.

Shared-secret mode lives here for every transport: a member with a secret
seals every bundle it sends and refuses every bundle not sealed with the
cluster's key (see `triogroups._keyring`). The secret comes from the stack
(`Stack` ``secret=``), else from ``secret_file``, else from the
``TRIOGROUPS_SECRET`` environment variable; it is kept only inside the
keyring, never in a property, stats or a log line.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Sequence
from typing import Any, ClassVar
from typing import Protocol as TypingProtocol

import trio

from triogroups._keyring import Keyring
from triogroups.address import Address
from triogroups.events import Item
from triogroups.message import Message
from triogroups.properties import Bool, Duration, Int, Str, between, positive
from triogroups.protocol import Protocol
from triogroups.transports._drops import DropLog
from triogroups.view import View
from triogroups.wire import WireCodec

__all__ = ["SECRET_ENV", "Transport", "UpChannel", "fan_out_targets"]

#: The environment variable a member takes its cluster secret from when its stack
#: gives none and ``secret_file`` is empty.
SECRET_ENV = "TRIOGROUPS_SECRET"


class UpChannel(TypingProtocol):
    """Where a transport pushes what it receives: a trio memory channel, or in a stack
    the inlet of the layer above, which may run that layer's handler (and the idle
    layers above it) before ``send`` returns. Awaiting it is the transport's
    back-pressure: it blocks once the layers above are busy and their inbox is full."""

    async def send(self, item: Item, /) -> None: ...

    def send_nowait(self, item: Item, /) -> None:
        """As ``send``; raises trio.WouldBlock instead of waiting."""


def is_multicast(value: str) -> bool:
    """An IPv4 multicast group address ("224.0.75.75")."""
    try:
        return ipaddress.IPv4Address(value).is_multicast
    except ValueError:
        return False


def fan_out_targets(
    members: Sequence[Address], next_view: View | None, me: Address | None
) -> list[Address]:
    """Where a multicast goes that is one send per member (TCP): ``members`` and, while
    a view is being installed (`TmpView`), its joiners too, since they get multicasts
    from the digest on; never ``me``, in that order, each once."""
    if next_view is not None:
        members = tuple(dict.fromkeys([*members, *next_view.members]))
    return [m for m in members if m != me]


class Transport(Protocol):
    """Base class of transports (UDP, TCP, the simulated network).

    ``lossless`` says whether a message the transport has accepted can still
    be lost before it reaches the layer above (UDP: yes; TCP: no). NAKACK2's
    no-retransmission mode is refused over a lossy transport.

    ``supports_multicasting`` says whether a multicast reaches every member
    of the cluster, in the view or not (IP multicast, the simulated
    network), or only the members of the current view (TCP sends it to
    each). MERGE3 must find members of other views some other way then.
    """

    lossless: ClassVar[bool] = False
    supports_multicasting: ClassVar[bool] = True

    secret_file = Str(
        "",
        doc="file holding the cluster's shared secret (turns on encryption); "
        f"empty: ${SECRET_ENV} if set",
    )
    rollover_time = Duration(
        30.0,
        doc="after a new secret is installed: the old key is accepted this long; "
        "senders switch at half of it",
        check=positive,
    )

    # Diagnostics (JGroups' DiagnosticsHandler in the transport): the stack host answers
    # probes on its own sockets, bound where the transport binds (triogroups.inspector).
    enable_diagnostics = Bool(True, doc="answer probes (triogroups probe)")
    diagnostics_addr = Str(
        "224.0.75.75",
        doc="probe multicast group",
        check=is_multicast,
        rule="an IPv4 multicast address",
    )
    diagnostics_port = Int(
        7500,
        doc="probe port (UDP; first TCP port)",
        check=between(1, 65535),
        rule="in 1..65535",
    )
    diagnostics_port_range = Int(
        50,
        doc="TCP ports tried above it",
        check=between(0, 65535),
        rule="in 0..65535",
    )
    diag_enable_udp = Bool(True, doc="answer probes by multicast")
    diag_enable_tcp = Bool(False, doc="answer probes over TCP")

    def __init__(self, **properties: Any) -> None:
        super().__init__(**properties)
        self.keyring: Keyring | None = None
        self._given_secret: bytes | None = None
        logger = logging.getLogger(type(self).__module__)
        label = self.name or type(self).__name__
        #: What came in and was thrown away, counted by reason (the ``decode_errors`` of
        #: `stats`), and what could not be sent (the ``dropped_<reason>`` keys).
        self.drops = DropLog(logger, label)
        self.send_drops = DropLog(logger, label, direction="to")

    def reset_stats(self) -> None:
        """Zero the counters (`Protocol.reset_stats`), the drops by reason, which every
        transport counts in its two `DropLog`s, and the keyring's (``shared_secret``)."""
        super().reset_stats()
        self.drops.counts.clear()
        self.send_drops.counts.clear()
        if self.keyring is not None:
            self.keyring.reset_stats()

    def bind_interface(self) -> str | None:
        """The address this transport binds to (``bind_addr``), where diagnostics bind
        too; None for a transport without sockets (the simulated network)."""
        bind = getattr(self, "bind_addr", None)
        return bind if isinstance(bind, str) else None

    def give_secret(self, secret: bytes) -> None:
        """Use ``secret`` rather than ``secret_file`` or the environment; before `start`."""
        self._given_secret = secret

    def start(self, local_address: Address, cluster: str, now: float) -> None:
        """Make the keyring if the member has a secret (an unreadable ``secret_file`` or
        a bad secret is a start-up error)."""
        super().start(local_address, cluster, now)
        secret = self._given_secret
        self._given_secret = None
        if secret is None:
            secret = self._read_secret()
        if secret is not None:
            self.keyring = Keyring(cluster, secret, clock=trio.current_time)

    def _read_secret(self) -> bytes | None:
        if self.secret_file:
            try:
                with open(self.secret_file, "rb") as f:
                    return f.read().strip()
            except OSError as exc:
                raise OSError(
                    f"{self.name}.secret_file {self.secret_file!r} cannot be read: {exc.strerror}"
                ) from None
        value = os.environ.get(SECRET_ENV)
        return None if not value else value.encode()

    def install_secret(self, secret: bytes) -> None:
        """Rotate to ``secret`` (see `Keyring.install`); refused when encryption is off."""
        if self.keyring is None:
            raise RuntimeError("shared-secret mode is off: start the stack with a secret first")
        self.keyring.install(secret, self.rollover_time)

    def make_codec(self, max_size: int) -> WireCodec:
        """The codec of this member's cluster, sealed if it has a secret."""
        return WireCodec(self.cluster, max_size=max_size, keyring=self.keyring)

    def secret_stats(self) -> dict[str, Any]:
        """``shared_secret``: the keyring's counters and key ids, when on."""
        return {} if self.keyring is None else {"shared_secret": self.keyring.stats()}

    def port_span(self) -> int | None:
        """How many ports above its first one this transport may listen on (its
        ``port_range``), or None when its port is not taken from a range (any free port,
        or none at all). TCPPING probes that many ports above each listed one by default."""
        return None

    def open(self) -> None:
        """Take what serving needs (bind sockets, attach to the network); at most once.

        The stack host calls it before it reports the layer started, so an
        error here is a start-up error (see `StartupError`); `serve` calls
        it too, for hosts that do not, and releases what it took when it
        ends. Raises with a message naming the cause (the port range, the
        address, the network). Nothing to take by default.
        """

    async def serve(
        self,
        down: trio.MemoryReceiveChannel[Item],
        up: UpChannel,
        *,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Run until cancelled (opening first, see `open`); call ``task_status.started()``
        once able to send."""
        raise NotImplementedError

    def send_now(self, batch: list[Message]) -> bool:
        """Send ``batch`` at once, in the caller's task, when that needs no await and
        overtakes nothing handed to `serve` before; False: not sent, queue it for `serve`.

        The stack's host offers every batch from the layer above here first while
        nothing waits in the transport's inbox (run to completion down to the socket,
        one task switch less per send). None by default.
        """
        return False

    def queued(self) -> None:
        """An item was queued for `serve`: `send_now` must not overtake it, so it
        refuses until `serve` has taken everything queued."""
