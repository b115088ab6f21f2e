"""The examples run on the simulated network here: the channel tests' fixtures, and a loader."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.channel.conftest import STACK, net, stack

__all__ = ["STACK", "example", "net", "stack"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def example() -> object:
    """``example("chat")`` imports examples/chat.py as a module."""

    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load
