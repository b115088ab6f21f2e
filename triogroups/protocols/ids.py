"""Header ids of the protocols: one small int each, fixed for the wire.

They are allocated here, in one place, so two protocols can never claim the
same id and a header's id never changes between versions.
"""

PING = 10
TCPPING = 11
MERGE3 = 12
FD_ALL3 = 13
VERIFY_SUSPECT = 14
NAKACK2 = 20
MCAST = 21
UNICAST2 = 22
UNICAST3 = 23
STABLE = 24
SEQUENCER = 25
GMS = 30
UFC = 31
MFC = 32
FRAG = 33
STATE_TRANSFER = 34
#: The channel's application seqno on every ordered multicast: a plain int header.
APP_SEQNO = 35
DIAG = 40
RPC = 50
AUTH = 60
ENCRYPT = 61
