"""The protocol layers, one sans-IO module each; importing registers them by name."""

from triogroups.protocols.delay import Delay
from triogroups.protocols.discard import Discard
from triogroups.protocols.dupl import Dupl
from triogroups.protocols.fd_all3 import FdAll3
from triogroups.protocols.frag import Frag
from triogroups.protocols.gms import Gms
from triogroups.protocols.mcast import Mcast
from triogroups.protocols.merge3 import Merge3
from triogroups.protocols.mfc import Mfc
from triogroups.protocols.nakack2 import Nakack2
from triogroups.protocols.passthrough import PassThrough
from triogroups.protocols.ping import Ping
from triogroups.protocols.sequencer import Sequencer
from triogroups.protocols.stable import Stable
from triogroups.protocols.tcpping import TcpPing
from triogroups.protocols.ufc import Ufc
from triogroups.protocols.unicast2 import Unicast2
from triogroups.protocols.unicast3 import Unicast3
from triogroups.protocols.verify_suspect import VerifySuspect

__all__ = [
    "Delay",
    "Discard",
    "Dupl",
    "FdAll3",
    "Frag",
    "Gms",
    "Mcast",
    "Merge3",
    "Mfc",
    "Nakack2",
    "PassThrough",
    "Ping",
    "Sequencer",
    "Stable",
    "TcpPing",
    "Ufc",
    "Unicast2",
    "Unicast3",
    "VerifySuspect",
]
