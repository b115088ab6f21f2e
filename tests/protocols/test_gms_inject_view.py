"""Test-kit gap (issue 12): a test injects a view or a merge view into GMS (JGroups' injectView).

`InjectView` goes down to GMS, which installs the view as if the coordinator had sent it:
GMS's own state follows (coordinator or participant), the layers below get `ViewChange` and
the digest, the application gets the view. `SimCluster.inject_view` sends it to members of
a simulated cluster, where `install_view` passes a view past GMS.
"""

from __future__ import annotations

from typing import Any

import pytest

from triogroups import Address, MergeView, StackConfig, View, ViewId
from triogroups.events import BecomeServer, Connect, MergeDigest, SetDigest, ViewChange
from triogroups.extend import InjectView
from triogroups.protocols.gms import Gms
from triogroups.testing import open_cluster, wait_until
from triogroups.view import Digest

A, B, C, D = (Address(i, n) for i, n in ((1, "A"), (2, "B"), (3, "C"), (4, "D")))
STACK = StackConfig.of("SIM", "PING", "DISCARD", "NAKACK2", "GMS")


def _gms(me: Address) -> Gms:
    gms = Gms()
    gms.check_stack([], [])
    gms.start(me, "test", 0.0)
    return gms


def _member(me: Address, view: View) -> Gms:
    gms = _gms(me)
    gms.down_event(Connect(), 0.0)
    gms.install(view, 0.0)
    gms.take_down()
    gms.take_up()
    return gms


def _split(items: list[Any]) -> tuple[list[Any], list[Any]]:
    events = [i for i in items if not isinstance(i, list)]
    messages = [m for i in items if isinstance(i, list) for m in i]
    return events, messages


def test_injected_view_is_installed_as_from_the_coordinator_without_a_view_ack() -> None:
    gms = _member(B, View(ViewId(3, A), [A, B, C]))
    view = View(ViewId(4, B), [B, C])
    gms.down_event(InjectView(view), 1.0)
    events, messages = _split(gms.take_down())
    assert events == [ViewChange(view)] and messages == []
    assert gms.take_up() == [ViewChange(view)]
    assert gms.state == "coordinator" and gms.view == view
    assert gms.counters["views_injected"] == 1


def test_injected_older_view_or_one_without_this_member_is_ignored() -> None:
    gms = _member(B, View(ViewId(3, A), [A, B, C]))
    gms.down_event(InjectView(View(ViewId(3, C), [C, B])), 1.0)
    gms.down_event(InjectView(View(ViewId(9, A), [A, C])), 1.0)
    assert gms.take_down() == [] and gms.take_up() == []
    assert gms.view == View(ViewId(3, A), [A, B, C])
    assert gms.counters["old_views_ignored"] == 1
    assert gms.counters["injected_views_ignored"] == 1


def test_injected_view_at_a_client_installs_it_then_the_digest_then_becomes_server() -> None:
    gms = _gms(B)
    view = View(ViewId(2, A), [A, B])
    digest = Digest({A: (5, 5)})
    gms.down_event(InjectView(view, digest), 0.0)
    events, _ = _split(gms.take_down())
    assert events == [ViewChange(view), SetDigest(digest), BecomeServer()]
    assert gms.state == "participant"


def test_injected_merge_view_passes_the_other_subgroups_digest_then_installs() -> None:
    gms = _member(B, View(ViewId(3, B), [B, C]))
    subgroups = [View(ViewId(4, A), [A, D]), View(ViewId(3, B), [B, C])]
    merged = MergeView(ViewId(5, A), [A, D, B, C], subgroups)
    digest = Digest({A: (7, 7), B: (9, 9), C: (4, 4), D: (2, 2)})
    gms.down_event(InjectView(merged, digest), 1.0)
    events, messages = _split(gms.take_down())
    assert events == [MergeDigest(Digest({A: (7, 7), D: (2, 2)})), ViewChange(merged)]
    assert messages == []
    assert gms.state == "participant" and gms.view == merged


async def test_cluster_inject_view_drops_a_member_through_gms(autojump_clock: Any) -> None:
    """A and B are told C is gone: B's GMS, the layers and the application follow, and
    multicasts after it go on between A and B."""
    async with open_cluster(3, STACK, seed=11) as cluster:
        a, b, c = cluster.members
        before = await cluster.wait_for_view()
        view = View(ViewId(before.view_id.id + 1, a.address), [a.address, b.address])
        await cluster.inject_view(view)
        await cluster.wait_for_view([a, b])
        assert c.view == before
        assert a.protocol("GMS").stats()["state"] == "coordinator"
        assert a.protocol("NAKACK2").view == view
        await a.send(b"a1")
        await b.send(b"b1")
        await wait_until(lambda: sum(len(m.delivered) for m in (a, b)) >= 4, timeout=30)
        cluster.check_contract([a, b])


async def test_cluster_inject_merge_view_after_injected_split(autojump_clock: Any) -> None:
    """Split {A,B,C} into {A,B} and {C} by injection, then inject the merge: everyone
    installs one MergeView whose subgroups are the two sides, and GMS coordinates it."""
    async with open_cluster(3, STACK, seed=12) as cluster:
        a, b, c = cluster.members
        first = await cluster.wait_for_view()
        n = first.view_id.id
        left = View(ViewId(n + 1, a.address), [a.address, b.address])
        right = View(ViewId(n + 1, c.address), [c.address])
        await cluster.inject_view(left)
        await cluster.inject_view(right)
        await cluster.wait_for_view([a, b])
        await cluster.wait_for_view([c])
        merged = cluster.merge_view(left, right)
        assert merged.view_id == ViewId(n + 2, a.address)
        await cluster.inject_view(merged)
        final = await cluster.wait_for_view()
        assert isinstance(final, MergeView) and final.subgroups == (left, right)
        states = [m.protocol("GMS").stats()["state"] for m in cluster.members]
        assert states == ["coordinator", "participant", "participant"]


async def test_cluster_inject_view_refuses_a_member_outside_the_view(autojump_clock: Any) -> None:
    async with open_cluster(2, STACK, seed=13) as cluster:
        a, b = cluster.members
        view = View(ViewId(9, a.address), [a.address])
        with pytest.raises(ValueError, match="B is not in the injected view"):
            await cluster.inject_view(view, [a, b])
