"""Which form of a compiled-core module runs: the Cython-built one or its pure-Python source.

A compiled-core module (``_wire_loop``, ``_layer._scan``) is a plain ``.py`` file that the build
also compiles with Cython into an extension module of the same name beside it; Python's import
prefers the extension. ``TRIOGROUPS_PURE_PYTHON=1`` in the environment makes `load` return the
``.py`` instead (loaded from its file under the name ``<module>_pure``), as does a build without a C
compiler, which leaves no extension. The choice is made once per process, at import; `pure` loads
the Python form whatever the switch says, so the tests can run both side by side. This module
imports nothing from triogroups: it only finds files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["PURE_ENV", "describe", "is_compiled", "load", "pure", "pure_requested"]

#: The environment variable that selects the pure-Python modules (any value but "" and "0").
PURE_ENV = "TRIOGROUPS_PURE_PYTHON"

_PACKAGE = __name__.rpartition(".")[0]


def pure_requested() -> bool:
    """Whether ``TRIOGROUPS_PURE_PYTHON`` asks for the pure-Python modules."""
    return os.environ.get(PURE_ENV, "") not in ("", "0")


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` is an extension module rather than Python source."""
    return not (module.__file__ or "").endswith(".py")


def pure(name: str) -> ModuleType:
    """The pure-Python form of the compiled-core module ``name``, a name inside the package
    (``"_wire_loop"``, ``"_layer._scan"``), loaded once from its ``.py`` file as
    ``triogroups.<name>_pure``."""
    full = f"{_PACKAGE}.{name}_pure"
    loaded = sys.modules.get(full)
    if loaded is not None:
        return loaded
    path = Path(__file__).parent.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(full, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no pure-Python source for {name} at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[full] = module
    spec.loader.exec_module(module)
    return module


def load(name: str) -> ModuleType:
    """The form of ``name`` this process runs: the compiled one unless
    ``TRIOGROUPS_PURE_PYTHON`` is set or none was built."""
    if pure_requested():
        return pure(name)
    return importlib.import_module(f"{_PACKAGE}.{name}")


def describe(module: ModuleType) -> str:
    """One line saying which form ``module`` is and why: for the start-up log and
    ``triogroups --version``."""
    if is_compiled(module):
        return "compiled core (Cython)"
    if pure_requested():
        return f"pure Python ({PURE_ENV} is set)"
    return "pure Python (no compiled core was built: see the install docs)"
