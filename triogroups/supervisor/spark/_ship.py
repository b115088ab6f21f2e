"""The member function's own code on the executors: send what only the driver can import.

A member function travels pickled by reference (its module and name) when its module is
importable on the driver, and each task's Python worker imports that module. In local modes
the workers run with the driver's ``sys.path`` (`spark_session`); on a cluster they import
from the executor's own environment, where a module beside the driver's script, or a package
of the driver's project, is missing: every task failed with ModuleNotFoundError and Spark
retried the stage for a minute before a raw Py4JJavaError said so (issue 39). So before a
stage is built for a cluster master, the member's module is added as ``sc.addPyFile`` does:
a top-level module as its ``.py`` file, a module inside a package as a zip of its top-level
package (made once per driver process, in a temporary directory removed at exit). Code the
executors have as the driver has it is not sent: the standard library, site-packages,
triogroups, and files the application already added (``--py-files``, ``addPyFile``). A
module that cannot travel this way (a namespace package, a compiled extension, one loaded
from an archive) is refused on the driver, in one line that says what to do.

A module loaded from a file by path (``triogroups spark path/to/app.py:fn``, test kits) has
no importable name at all: it travels by value with the function, like ``__main__``, on
every master.

This module never starts a stage and never changes the session beyond adding files to it.
"""

from __future__ import annotations

import atexit
import functools
import importlib.machinery
import inspect
import shutil
import site
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType
from typing import Any

from triogroups.supervisor.spark._setup import SparkGroupError

__all__ = ["ship_member_code"]

_OURS = ("triogroups", "pyspark", "py4j")  # installed on every executor, never sent
_HOW = "install it on every executor, or pass it with spark-submit --py-files"
_shipped: set[tuple[str, str]] = set()  # (application id, file name) added so far
_zips: dict[Path, Path] = {}  # package directory -> its zip, made once per process


def _installed_roots() -> list[Path]:
    """Where code lives that the executors import from their own installation."""
    paths = sysconfig.get_paths()
    roots = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths]
    roots += site.getsitepackages()
    roots.append(site.getusersitepackages())
    return [Path(root).resolve() for root in dict.fromkeys(roots)]


def _module_names(member_fn: object) -> list[str]:
    """The modules a member function's pickle refers to by name: the function's (through
    partials), and the class's for a callable object."""
    target = member_fn
    while isinstance(target, functools.partial):
        target = target.func
    names = [getattr(target, "__module__", None)]
    if not (inspect.isfunction(target) or inspect.ismethod(target)):
        names.append(type(target).__module__)
    return [name for name in dict.fromkeys(names) if name]


def _by_value(module: ModuleType) -> None:
    from pyspark import cloudpickle

    register: Any = cloudpickle.register_pickle_by_value  # untyped in pyspark
    register(module)


def _cannot(name: str, why: str) -> SparkGroupError:
    return SparkGroupError(
        f"member_fn's module {name!r} cannot be sent to the executors ({why}): {_HOW}"
    )


def _package_zip(name: str, top: ModuleType) -> Path:
    """A zip of the top-level package ``top`` (every file but caches and hidden ones)."""
    origin = getattr(top, "__file__", None)
    if origin is None:
        raise _cannot(name, f"{top.__name__!r} is a namespace package")
    directory = Path(origin).resolve().parent
    made = _zips.get(directory)
    if made is not None:
        return made
    temp = Path(tempfile.mkdtemp(prefix="triogroups-pyfiles-"))
    atexit.register(shutil.rmtree, temp, ignore_errors=True)
    made = temp / f"{top.__name__}.zip"
    with zipfile.ZipFile(made, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            inside = path.relative_to(directory)
            if path.is_file() and not any(
                part == "__pycache__" or part.startswith(".") for part in inside.parts
            ):
                archive.write(path, Path(top.__name__) / inside)
    _zips[directory] = made
    return made


def _file_to_send(name: str, sc: Any) -> Path | None:
    """The file that carries module ``name`` to the executors, or None when they have it."""
    top_name = name.partition(".")[0]
    if top_name in _OURS or top_name in sys.builtin_module_names:
        return None
    module, top = sys.modules.get(name), sys.modules.get(top_name)
    if module is None or top is None:
        return None
    origin = getattr(module, "__file__", None)
    if origin is None:
        raise _cannot(name, "it has no file")
    path = Path(origin).resolve()
    roots = _installed_roots()
    if any(path.is_relative_to(root) for root in roots):
        return None
    added = {Path(str(added)).name for added in sc.listFiles}
    if not path.is_file():  # inside an archive: one the application added, or none
        if any(part in added for part in path.parts):
            return None
        raise _cannot(name, f"it was loaded from an archive, {origin}")
    if path.suffix != ".py":
        raise _cannot(name, f"{path.name} is not a .py file")
    if module is top:
        return None if path.name in added else path
    return None if f"{top_name}.zip" in added else _package_zip(name, top)


def ship_member_code(sc: Any, member_fn: object) -> None:
    """Make the member function's module importable in the tasks of ``sc``'s next stages.

    A module without an importable name travels by value; on a cluster master, a module the
    executors do not have is added to ``sc`` (once per application). SparkGroupError, with
    what to do, for a module that cannot be sent."""
    on_cluster = not str(sc.master).startswith("local")
    for name in _module_names(member_fn):
        module = sys.modules.get(name)
        if module is None or name == "__main__":
            continue
        if "." not in name and importlib.machinery.PathFinder.find_spec(name, sys.path) is None:
            _by_value(module)
            continue
        if not on_cluster:
            continue  # the Python workers import with the driver's sys.path
        path = _file_to_send(name, sc)
        if path is None or (sc.applicationId, path.name) in _shipped:
            continue
        sc.addPyFile(str(path))
        _shipped.add((sc.applicationId, path.name))
