"""The live inspector: poll a source of answers, fold them into the display, draw, read keys.

The source is any async callable returning this round's answers (`probe` for
a real cluster; the tests pass answers built in-process), so the loop is the
same whatever the answers come from. A round starts every ``interval``
seconds; a key redraws at once. A source that fails with OSError (no network)
leaves the last display and says so in the header, and the next round tries
again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any

import trio
from rich.console import Console
from rich.live import Live

from triogroups.inspector._model import Display, step
from triogroups.inspector._render import render
from triogroups.inspector._select import QUIT, Selection, apply_key

__all__ = ["Source", "run_tui"]

Source = Callable[[], Awaitable[Sequence[Mapping[str, Any]]]]
"""An async callable returning one round of answers, one dict per member."""


class _Screen:
    """What is on the screen: the display, the selection, a status line."""

    def __init__(self, live: Live, note: Callable[[], str] | None) -> None:
        self.live = live
        self.note = note
        self.display: Display | None = None
        self.selection = Selection()
        self.status = ""
        self.rounds = 0

    def draw(self) -> None:
        status = self.status if self.note is None else f"{self.status}  {self.note()}"
        self.live.update(render(self.display, self.selection, status=status), refresh=True)


async def run_tui(
    source: Source,
    console: Console,
    *,
    keys: AsyncIterator[str] | None = None,
    interval: float = 1.0,
    screen: bool = True,
    silent_after: float = 2.5,
    forget_after: float = 10.0,
    note: Callable[[], str] | None = None,
) -> None:
    """Show the answers of ``source`` live until a quit key (q, Ctrl-C) or the end of ``keys``.

    Without ``keys`` it runs until cancelled. ``screen`` uses the terminal's
    alternate screen, so quitting leaves the shell's screen as it was.
    ``note()``, if given, is shown in the header at every draw.
    """
    if interval <= 0:
        raise ValueError(f"interval must be > 0, got {interval}")
    with Live(
        render(None, Selection()),
        console=console,
        screen=screen,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as live:
        view = _Screen(live, note)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_poll, view, source, interval, silent_after, forget_after)
            if keys is None:
                return
            async for key in keys:
                chosen = apply_key(view.selection, view.display, key)
                if chosen == QUIT:
                    break
                assert isinstance(chosen, Selection)
                view.selection = chosen
                view.draw()
            nursery.cancel_scope.cancel()


async def _poll(
    view: _Screen, source: Source, interval: float, silent_after: float, forget_after: float
) -> None:
    while True:
        started = trio.current_time()
        try:
            answers = await source()
        except OSError as exc:
            view.status = f"probe failed: {exc}"
        else:
            view.rounds += 1
            view.status = f"round {view.rounds}"
            view.display = step(
                view.display,
                answers,
                trio.current_time(),
                silent_after=silent_after,
                forget_after=forget_after,
            )
        view.draw()
        await trio.sleep_until(started + interval)
