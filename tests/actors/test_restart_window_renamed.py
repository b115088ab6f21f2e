"""``within`` renamed ``restart_window`` (issue 40 item 7): the same window had two names.

`Stack`, ``triogroups launch --restart-window`` and ``RESTART_WINDOW`` said ``restart_window``;
`Supervisor`, `open_process_group` and `RestartIntensityExceeded` said ``within``. The one name
now is ``restart_window``; ``within`` still works for one release and warns naming it.
"""

from __future__ import annotations

import pickle
import warnings

import pytest
import trio

from tests.actors.test_actors_intensity import Scheduled, no_backoff, run_for
from triogroups import ChildSpec, RestartIntensityExceeded, Supervisor, open_process_group


async def test_supervisor_takes_within_as_restart_window_with_a_warning(
    autojump_clock: trio.abc.Clock,
) -> None:
    """A 0.5 s window given as ``within``: crashes a second apart never escalate (the default
    5 s window would have at the second crash), so the old name still sets the window."""
    crasher = Scheduled(1, 2, 3)
    with pytest.warns(DeprecationWarning, match="within is deprecated, use restart_window") as w:
        supervisor = Supervisor(
            "root", [ChildSpec("w", crasher)], **no_backoff(max_restarts=1, within=0.5)
        )
    assert w[0].filename == __file__
    assert supervisor.restart_window == 0.5
    await run_for(supervisor, 10)
    assert supervisor.stats()["restarts"] == 3
    with pytest.warns(DeprecationWarning, match="Supervisor.within"):
        assert supervisor.within == 0.5


def test_supervisor_refuses_both_names() -> None:
    with pytest.raises(TypeError, match="both within and restart_window"):
        Supervisor("root", [], within=1.0, restart_window=2.0)


def test_restart_window_alone_warns_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert Supervisor("root", [], restart_window=2.0).restart_window == 2.0


def test_restart_intensity_exceeded_says_restart_window_and_keeps_within_as_a_warning() -> None:
    error = RestartIntensityExceeded("root", [], 3, 2.5)
    assert error.restart_window == 2.5
    again = pickle.loads(pickle.dumps(error))
    assert again.restart_window == 2.5
    with pytest.warns(DeprecationWarning, match="RestartIntensityExceeded.within") as w:
        assert error.within == 2.5
    assert w[0].filename == __file__


async def test_open_process_group_takes_within_with_a_warning_naming_restart_window() -> None:
    """The old name is translated before anything starts: here the bad ``app`` is refused
    right after the warning, so no member process is launched."""
    with (
        pytest.warns(DeprecationWarning, match="open_process_group\\(\\): within .* restart_") as w,
        pytest.raises(TypeError, match="app must be a function"),
    ):
        async with open_process_group(42, 1, within=3.0):  # type: ignore[arg-type]
            pass
    assert w[0].filename == __file__
