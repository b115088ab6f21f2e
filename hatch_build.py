"""hatchling's build hook: compile the compiled core with Cython, or leave the pure Python.

The compiled-core modules (each ``.py`` of the package, subpackages included, with a
``.pxd`` beside it: `compiled_core`) are plain Python files typed for Cython by that ``.pxd``;
this hook compiles them into extension modules of the same names (issue 43). A wheel
(``pip install .``, ``python -m build``) gets them as files of its own and a platform tag; an
editable install (``pip install -e .``, what dev.py does) gets them built in place beside
their sources, where the editable install's path entry finds them. Without a working C
compiler (or with ``TRIOGROUPS_PURE_PYTHON=1`` set during the build) the hook warns and the
package installs as pure Python, which runs the same modules as source. A Cython error in the
sources themselves is a bug and fails the build.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: A module of the package with a ``.pxd`` beside it is a compiled-core module (dev.py's
#: `build_inputs` reads the same rule to know when to install again). A ``.pxd`` alone
#: (``_message_layout.pxd``) only declares what the others cimport.
TYPED = "triogroups/**/*.pxd"
PURE_ENV = "TRIOGROUPS_PURE_PYTHON"


def compiled_core(root: Path) -> list[Path]:
    """The ``.py`` files under ``root`` that the build compiles: each with a ``.pxd`` beside it."""
    return [
        pxd.with_suffix(".py")
        for pxd in sorted(root.glob(TYPED))
        if pxd.with_suffix(".py").exists()
    ]


class CompiledCoreHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"
    _work: Path | None = None  # the C sources and the built modules, removed in `finalize`

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if os.environ.get(PURE_ENV, "") not in ("", "0"):
            self._warn(f"{PURE_ENV} is set: building the pure-Python package only")
            return
        editable = version == "editable"
        try:
            from Cython.Build import cythonize
        except ImportError as exc:
            self._warn(f"Cython is not installed ({exc}): building the pure-Python package only")
            return
        work = self._work = Path(tempfile.mkdtemp(prefix="triogroups-cython-"))
        from setuptools import Distribution, Extension
        from setuptools.errors import CCompilerError, ExecError, PlatformError

        root = Path(self.root)
        extensions = [
            Extension(".".join(py.relative_to(root).with_suffix("").parts), [str(py)])
            for py in compiled_core(root)
        ]
        compiled = cythonize(
            extensions,
            build_dir=str(work / "c"),
            compiler_directives={"language_level": 3},
            quiet=True,
        )
        dist = Distribution({"name": "triogroups", "ext_modules": compiled})
        command = dist.get_command_obj("build_ext")
        command.inplace = editable
        command.build_lib = str(work / "lib")
        command.build_temp = str(work / "tmp")
        command.ensure_finalized()
        previous = os.getcwd()
        os.chdir(root)  # in place means beside the sources, from the project root
        try:
            command.run()
        except (CCompilerError, ExecError, PlatformError) as exc:
            self._warn(
                f"no compiled core ({type(exc).__name__}: {exc}); the package installs as pure "
                "Python, which works the same but spends more CPU per message"
            )
            return
        finally:
            os.chdir(previous)
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
        if editable:
            return
        for ext in compiled:
            built = Path(command.get_ext_fullpath(ext.name))
            build_data["force_include"][str(built)] = str(built.relative_to(work / "lib"))

    def _warn(self, message: str) -> None:
        self.app.display_warning(f"triogroups: {message}")

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
