"""The public surface: names, modules and docstrings users see (issue 12 item 12)."""

from __future__ import annotations

import pickle
import pydoc
import typing
from types import ModuleType
from typing import Any

import pytest

import triogroups
import triogroups.testing


def public_objects(module: ModuleType) -> list[tuple[str, Any]]:
    """Classes and functions re-exported by ``module`` and defined in triogroups."""
    found = []
    for name in module.__all__:
        obj = getattr(module, name)
        if (isinstance(obj, type) or callable(obj)) and getattr(obj, "__module__", "").startswith(
            "triogroups"
        ):
            found.append((name, obj))
    return found


@pytest.mark.parametrize("module", [triogroups, triogroups.testing], ids=lambda m: m.__name__)
def test_public_names_say_the_package_users_import_them_from(module: ModuleType) -> None:
    """help(GroupActor) must point at `triogroups`, not at a private module."""
    objects = public_objects(module)
    assert len(objects) > 20 if module is triogroups else len(objects) >= 4
    wrong = [name for name, obj in objects if obj.__module__ != module.__name__]
    assert wrong == []
    for name, obj in objects:
        page = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        assert "triogroups._" not in page.split("\n", 3)[2], name


def test_help_of_group_actor_names_triogroups() -> None:
    page = pydoc.render_doc(triogroups.GroupActor, renderer=pydoc.plaintext)
    assert page.startswith("Python Library Documentation: class GroupActor in module triogroups\n")


def test_type_hints_of_public_classes_still_resolve() -> None:
    """Moving ``__module__`` must not break `typing.get_type_hints` on public classes."""
    for _name, obj in public_objects(triogroups) + public_objects(triogroups.testing):
        if isinstance(obj, type):
            typing.get_type_hints(obj)
    hints = typing.get_type_hints(triogroups.ChildSpec)
    assert hints["name"] is str


def test_public_exceptions_pickle_by_their_public_name() -> None:
    """Errors cross process boundaries (supervisors, RPC): they must unpickle by name."""
    exc = triogroups.ActorCrashed("root.w", ValueError("x"), "tb")
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is triogroups.ActorCrashed and again.actor == "root.w"
    assert pickle.loads(pickle.dumps(triogroups.Flag.OOB)) is triogroups.Flag.OOB
