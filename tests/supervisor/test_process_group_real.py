"""`open_process_group` with real member processes over loopback UDP multicast: restarts as
new incarnations, the three strategies, escalation past the intensity, and functions shipped
from a test module and from a script's ``__main__``."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
import trio
from supervisor_kit import HERE, STEP, fast_udp, write_toml

from triogroups import (
    Channel,
    MemberRestarted,
    ProcessGroup,
    ProcessGroupFailed,
    Restart,
    Strategy,
    open_process_group,
)
from triogroups.testing import wait_until

pytestmark = pytest.mark.real


async def report_views(ch: Channel, tag: str) -> None:
    """The member app, defined here: shipped by reference to this test module."""
    print(f"{ch.name} runs with {tag}", flush=True)
    async for view in ch.views():
        print("view", ",".join(m.name for m in view.members), flush=True)


def quiet(name: str, line: str) -> None:
    """Member output is kept by the group (``MemberInfo.output``); nothing is printed."""


async def wait_restarted(group: ProcessGroup, names: set[str], incarnation: int) -> None:
    await wait_until(
        lambda: {m.name for m in group.members if m.incarnation == incarnation} == names,
        timeout=120,
    )


async def test_sigkilled_member_is_restarted_and_rejoins_as_a_new_incarnation() -> None:
    """one_for_one, PERMANENT: B is SIGKILLed; the supervisor starts it again, it joins with a
    new Address, and both members' views are back to 2 (A's without the dead B)."""
    async with open_process_group(
        report_views, 2, stack=fast_udp(), args=("tag-1",), output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(2)
        a, b = group.members
        assert a.output[-2:] != () and "A runs with tag-1" in a.output
        events = group.events()
        group.kill("B", signal.SIGKILL)
        with trio.fail_after(STEP):
            async for event in events:
                if isinstance(event, MemberRestarted):
                    assert (event.name, event.incarnation) == ("B", 2)
                    break
            view = await group.wait_for_view(2)
        a2, b2 = group.members
        assert b2.incarnation == 2 and b2.address != b.address and b2.pid != b.pid
        assert (a2.incarnation, a2.address) == (1, a.address)
        assert set(view.members) == {a.address, b2.address}
        exits = [e for e in group.history if type(e).__name__ == "MemberExited"]
        assert [(e.name, e.reason, e.expected) for e in exits] == [
            ("B", "killed by SIGKILL", False)
        ]


@pytest.mark.parametrize(
    ("strategy", "restarted"),
    [(Strategy.ONE_FOR_ALL, {"A", "B", "C"}), (Strategy.REST_FOR_ONE, {"B", "C"})],
)
async def test_strategy_decides_which_members_restart_with_the_killed_one(
    strategy: Strategy, restarted: set[str]
) -> None:
    """Three members, B SIGKILLed: one_for_all restarts all three, rest_for_one B and C (the
    ones started after it); those restarted have new addresses, the others keep theirs, and
    every view is back to 3."""
    async with open_process_group(
        report_views, 3, stack=fast_udp(), args=("x",), strategy=strategy, output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(3)
        before = {m.name: m.address for m in group.members}
        group.kill("B")
        with trio.fail_after(STEP):
            await wait_restarted(group, restarted, 2)
            await group.wait_for_view(3)
        for member in group.members:
            again = member.name in restarted
            assert member.incarnation == (2 if again else 1), member
            assert (member.address != before[member.name]) is again, member
        stopped = {e.name for e in group.history if getattr(e, "expected", False)}
        assert stopped == restarted - {"B"}  # stopped gracefully for B's sake


async def test_member_that_crashes_at_start_up_escalates_with_its_name_reason_and_output() -> None:
    """A member whose app always raises: restarted max_restarts times, then the group stops
    and `ProcessGroupFailed` names the member, its exit status and its last output."""
    from member_apps import crash

    with pytest.raises(ProcessGroupFailed) as caught:
        async with open_process_group(
            crash,
            1,
            stack=fast_udp(),
            max_restarts=1,
            restart_window=600,
            backoff_initial=0.05,
            output=quiet,
        ) as group:
            with trio.fail_after(STEP * 3):
                await group.wait()
    error = caught.value
    text = str(error)
    assert "member 'A' exited with status 1" in text
    assert "RuntimeError: boom at start-up" in text and "A is about to fail" in text
    assert error.crash.member == "A" and error.crash.returncode == 1
    assert len(error.reports) == 2 and error.max_restarts == 1


async def test_add_member_and_restart_make_new_incarnations_in_the_view() -> None:
    """add_member starts C with its own arguments; restart("A") stops A gracefully and starts
    it again: the coordinator hands over, and the view is back to 3 with A's new address."""
    async with open_process_group(
        report_views, 2, stack=fast_udp(), args=("x",), restart=Restart.TRANSIENT, output=quiet
    ) as group:
        added = await group.add_member(args=("tag-c",))
        assert added.name == "C" and added.state == "running"
        with trio.fail_after(STEP):
            await group.wait_for_view(3)
        assert "C runs with tag-c" in group.member("C").output
        old = group.member("A").address
        restarted = await group.restart("A")
        assert restarted.incarnation == 2 and restarted.address != old
        with trio.fail_after(STEP):
            view = await group.wait_for_view(3)
        assert restarted.address in view.members and old not in view.members


async def test_function_in_a_scripts_main_runs_as_member(tmp_path: trio.Path) -> None:
    """A script defines its app in ``__main__`` (shipped by value with cloudpickle) and runs
    two members of it; both print the argument they were given."""
    stack = write_toml(fast_udp(), tmp_path / "stack.toml")
    script = HERE / "scripts" / "main_app.py"
    result = await trio.run_process(
        [sys.executable, str(script), str(stack)],
        capture_stdout=True,
        capture_stderr=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    assert "A got t0k3n" in out and "B got t0k3n" in out and out.endswith("ok\n")


async def test_members_outlive_the_idle_worker_thread_of_the_supervisor() -> None:
    """Linux sends the parent-death signal when the *thread* that forked a member ends; trio's
    worker threads end after about 10 s idle, so members forked in one would leave the group
    for no reason. Members are forked from the trio thread: after 15 s all still run."""
    async with open_process_group(
        report_views, 1, stack=fast_udp(), args=("x",), output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait_for_view(1)
        await trio.to_thread.run_sync(lambda: None)  # a worker thread that will idle out
        await trio.sleep(15)
        assert [m.incarnation for m in group.members] == [1]
        assert not [e for e in group.history if type(e).__name__ == "MemberExited"]


async def test_group_whose_transient_members_ended_normally_is_over() -> None:
    """TRANSIENT members that return are not restarted; once all ended the group is over:
    `wait` returns, a new event iterator ends at once, and add_member is refused without
    adding anyone."""
    from member_apps import returns

    async with open_process_group(
        returns, 1, stack=fast_udp(), restart=Restart.TRANSIENT, output=quiet
    ) as group:
        with trio.fail_after(STEP):
            await group.wait()
            assert [e async for e in group.events()] == []
        with pytest.raises(RuntimeError, match="is stopped, not running"):
            await group.add_member()
        (member,) = group.members
        assert (member.name, member.state, member.returncode) == ("A", "stopped", 0)
