"""GMS's roles as a transition table (`triogroups.protocols.gms._roles`), pair by pair, and
on a real `Gms` object."""

from __future__ import annotations

import itertools

import pytest

from triogroups import Address, View, ViewId
from triogroups.extend import Connect, Disconnect, Suspect
from triogroups.protocols.gms import Gms
from triogroups.protocols.gms._roles import ROLES, Role, RoleInput, next_role

C, P, K, L, X = Role.CLIENT, Role.PARTICIPANT, Role.COORDINATOR, Role.LEAVING, Role.LEFT
VC, VP, T, D, G = (
    RoleInput.VIEW_AS_COORD,
    RoleInput.VIEW_AS_PARTICIPANT,
    RoleInput.TAKEOVER,
    RoleInput.DISCONNECT,
    RoleInput.LEFT_GROUP,
)

#: The rules, written out once more by hand: every pair.
EXPECTED = {
    C: {VC: K, VP: P, T: C, D: C, G: X},
    P: {VC: K, VP: P, T: K, D: L, G: X},
    K: {VC: K, VP: P, T: K, D: L, G: X},
    L: {VC: L, VP: L, T: L, D: L, G: X},
    X: {VC: X, VP: X, T: X, D: X, G: X},
}


@pytest.mark.parametrize(("role", "event"), list(itertools.product(Role, RoleInput)))
def test_gms_role_table_has_every_pair_as_written(role: Role, event: RoleInput) -> None:
    assert next_role(role, event) is EXPECTED[role][event]


def test_gms_role_table_has_nothing_else_and_left_is_final() -> None:
    assert set(ROLES) == set(itertools.product(Role, RoleInput))
    assert all(next_role(X, event) is X for event in RoleInput)
    assert all(next_role(role, G) is X for role in Role)


A, B = Address(1, "A"), Address(2, "B")


def _gms(me: Address) -> Gms:
    gms = Gms()
    gms.check_stack([], [])
    gms.start(me, "test", 0.0)
    return gms


def test_gms_roles_on_a_real_object_singleton_then_participant_then_takeover_then_leave() -> None:
    """No discovery below: the member starts its own group (coordinator); a view from A
    makes it a participant; A suspected, it takes over; it disconnects and leaves."""
    gms = _gms(B)
    assert gms.state is C and gms.stats()["state"] == "client"
    gms.down_event(Connect(), 0.0)
    assert gms.state is K
    gms.install(View(ViewId(2, A), [A, B]), 0.0)
    assert gms.state is P
    gms.up_event(Suspect((A,)), 0.0)
    assert gms.state is K and gms.stats()["coordinator_takeovers"] == 1
    gms.down_event(Disconnect(), 0.0)
    assert gms.state in (L, X)
    gms.tick(60.0)
    assert gms.state is X and gms.stats()["state"] == "left"
