"""The public surface: names, modules and docstrings users see (issue 12 item 12)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pydoc
import typing
from types import ModuleType
from typing import Any

import pytest

import triogroups
import triogroups.events
import triogroups.extend
import triogroups.properties
import triogroups.testing
import triogroups.wire
from triogroups._public import PUBLIC_NAMESPACES


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


PUBLIC_MODULES = [importlib.import_module(ns.module) for ns in PUBLIC_NAMESPACES]


@pytest.mark.parametrize(
    "module",
    [m for m in PUBLIC_MODULES if m is not triogroups.extend],  # extend: checked below
    ids=lambda m: m.__name__,
)
def test_public_names_say_the_package_users_import_them_from(module: ModuleType) -> None:
    """help(GroupActor) must point at `triogroups`, not at a private module."""
    objects = public_objects(module)
    assert len(objects) > 20 if module is triogroups else len(objects) >= 4
    wrong = [name for name, obj in objects if obj.__module__ != module.__name__]
    assert wrong == []
    for name, obj in objects:
        page = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        assert "triogroups._" not in page.split("\n", 3)[2], name


def test_application_names_at_the_top_protocol_author_names_in_extend() -> None:
    """Issue 19: the top level is what an application uses; the sans-IO contract, events,
    layers, transports and codec are in `triogroups.extend`, each under one name only, and
    every one of them is defined in a public module (pickles and help() resolve)."""
    top, extend = set(triogroups.__all__), set(triogroups.extend.__all__)
    assert top.isdisjoint(extend), top & extend
    assert {"open_channel", "Channel", "open_process_group", "StackConfig", "probe"} <= top
    assert {"Protocol", "register_header", "WireCodec", "ViewChange", "Gms"} <= extend
    for name in extend:
        module = getattr(triogroups.extend, name).__module__
        assert module.startswith("triogroups.") and "._" not in module, (name, module)


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


def undocumented(modules: list[ModuleType]) -> list[str]:
    """Public classes, functions, methods and properties reachable from ``modules``' ``__all__``
    (and defined in triogroups) without a docstring.

    Methods are looked up as ``help()`` shows them: an override without its own docstring
    inherits its base's (`inspect.getdoc`), so documenting `Protocol.down` documents every
    protocol's ``down``. Methods inherited from a private base (``FlowControl``) are checked
    through the public subclass.
    """
    missing: list[str] = []
    seen: set[object] = set()
    for module in modules:
        for name, obj in public_objects(module):
            if obj in seen:
                continue
            seen.add(obj)
            if not inspect.getdoc(obj):
                missing.append(f"{module.__name__}.{name}")
            if not isinstance(obj, type):
                continue
            for klass in obj.__mro__:
                if not klass.__module__.startswith("triogroups"):
                    continue
                for attr, value in vars(klass).items():
                    if attr.startswith("_") or (klass, attr) in seen:
                        continue
                    seen.add((klass, attr))
                    if isinstance(value, staticmethod | classmethod):
                        value = value.__func__
                    if isinstance(value, property):
                        doc = inspect.getdoc(value)
                    elif inspect.isfunction(value):
                        doc = inspect.getdoc(getattr(obj, attr))
                    else:
                        continue
                    if not doc:
                        missing.append(f"{klass.__module__}.{klass.__qualname__}.{attr}")
    return missing


def test_every_public_class_function_and_method_has_a_docstring() -> None:
    """Issue 12 item 12: what a user or protocol author reaches from a public namespace
    (`PUBLIC_NAMESPACES`) says what it does (72 public methods had nothing), and so do the
    modules a protocol author imports from beside `triogroups.extend` (properties, events,
    the wire codec)."""
    assert undocumented(PUBLIC_MODULES) == []
    authors = [triogroups.properties, triogroups.events, triogroups.wire]
    assert undocumented(authors) == []


def test_the_docstring_check_finds_an_undocumented_method_property_and_function() -> None:
    """The check above can fail: a module with undocumented members is reported."""
    fake = ModuleType("triogroups.fake")

    class Thing:
        """Documented."""

        def act(self) -> None:
            pass

        @property
        def size(self) -> int:
            return 0

        def _private(self) -> None:
            pass

    def helper() -> None:
        pass

    for obj in (Thing, helper):
        obj.__module__ = fake.__name__
    fake.Thing, fake.helper = Thing, helper  # type: ignore[attr-defined]
    fake.__all__ = ["Thing", "helper"]  # type: ignore[attr-defined]
    found = undocumented([fake])
    assert sorted(found) == [
        "triogroups.fake.helper",
        f"triogroups.fake.{Thing.__qualname__}.act",
        f"triogroups.fake.{Thing.__qualname__}.size",
    ]
