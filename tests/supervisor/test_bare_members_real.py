"""Process groups whose members run a bare stack (``bare=True``) and members started behind a
launcher: what the test kit's protocol-level members stand on (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from member_apps import Notes, bare
from supervisor_kit import STEP

from triogroups import AppError, StackConfig, open_process_group
from triogroups.testing import free_ports, wait_until

pytestmark = pytest.mark.real

TRANSPORT_ONLY = Path(__file__).resolve().parents[1] / "real" / "stacks" / "udp-transport.toml"


def _transport_only() -> StackConfig:
    config = StackConfig.resolve(str(TRANSPORT_ONLY))
    return config.configure("UDP", mcast_port=free_ports())


async def test_bare_member_gets_its_started_stack_without_gms_behind_a_launcher() -> None:
    """A stack without GMS is refused for a channel but runs with ``bare=True``: the app gets
    the started stack, whose address is the one the member reported as joined; the member's
    command line runs behind ``launcher`` (here ``env``, which execs the rest)."""
    lines: list[str] = []
    with pytest.raises(AppError, match="stack must contain GMS"):
        async with open_process_group(bare, 1, stack=_transport_only()):
            pass
    async with open_process_group(
        bare,
        1,
        stack=_transport_only(),
        bare=True,
        launcher=("env", "TRIOGROUPS_TEST_MARK=launched"),
        output=lambda name, line: lines.append(line),
    ) as group:
        await wait_until(lambda: "mark launched" in lines, timeout=STEP)
        (member,) = group.members
        assert member.state == "running" and member.view is None
        (layers,) = [x for x in lines if x.startswith("layers ")]
        assert layers == f"layers UDP,PING address {member.address}"


async def test_bare_members_take_no_state() -> None:
    with pytest.raises(ValueError, match="state needs a channel"):
        async with open_process_group(bare, 1, stack=_transport_only(), bare=True, state=Notes()):
            pass
