"""Chaos runs: real member processes under seeded faults, judged by the history checker.

`fault_schedule` is the pure, seeded schedule; `_control` the loopback control
socket each member's network layers obey; `_member` the member program; `_run`
the ``triogroups chaos`` command that ties them to the process supervisor and
`triogroups.testing.check_histories`.
"""

from triogroups.chaos._control import apply_state, decode_state, encode_state, serve_control
from triogroups.chaos._run import ChaosResult, add_chaos_parser, chaos_config, run_chaos
from triogroups.chaos._schedule import (
    FAULT_KINDS,
    LOSSLESS_KINDS,
    Fault,
    NetworkState,
    fault_schedule,
    network_state,
    quiet_time,
)

__all__ = [
    "FAULT_KINDS",
    "LOSSLESS_KINDS",
    "ChaosResult",
    "Fault",
    "NetworkState",
    "add_chaos_parser",
    "apply_state",
    "chaos_config",
    "decode_state",
    "encode_state",
    "fault_schedule",
    "network_state",
    "quiet_time",
    "run_chaos",
    "serve_control",
]
