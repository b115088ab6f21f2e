"""Issue 40: the channel is split by job, one module each, none a second monolith.

The send path (`_outgoing`), the reader (`_delivery`), state transfer (`_transfer`),
the dispatcher (`_dispatcher`), join and leave (`_membership`) and the facade
(`_facade`) each say their one job in their docstring's first line; the package's
layers contract (pyproject.toml) keeps them importing downwards only. At run time
`Channel` is still one class (help() and the docs name no private base).
"""

from __future__ import annotations

import ast
from pathlib import Path

import triogroups
from triogroups._channel import _delivery, _dispatcher, _membership, _outgoing, _transfer

PACKAGE = Path(triogroups.__file__).parent / "_channel"
MAX_LINES = 600


def test_every_channel_module_says_its_job_and_stays_small() -> None:
    for path in sorted(PACKAGE.glob("*.py")):
        text = path.read_text()
        doc = ast.get_docstring(ast.parse(text))
        assert doc and doc.strip(), f"{path.name} has no docstring"
        assert len(text.splitlines()) <= MAX_LINES, f"{path.name} is over {MAX_LINES} lines"
    assert not (PACKAGE / "_channel.py").exists()


def test_channel_is_one_class_at_run_time_with_every_job_method() -> None:
    """The jobs are private bases for the type checker; `Channel` holds their methods."""
    assert triogroups.Channel.__mro__ == (triogroups.Channel, object)
    jobs = (_outgoing.Outgoing, _delivery.Reader, _transfer.StateTransfer)
    jobs += (_dispatcher.Dispatcher, _membership.Membership)
    for job in jobs:
        for name, value in vars(job).items():
            if callable(value) and not name.startswith("__"):
                assert vars(triogroups.Channel)[name] is value, name
