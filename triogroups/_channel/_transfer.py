"""The channel's state transfer: ask for the state, serve it, apply it (the design is in `_state`).

A joiner with a state provider holds back what it delivers (`_held`) until the
state is set; the dispatcher calls these steps in delivery order and hands over
what was held once a step says the transfer is done.
"""

from __future__ import annotations

import inspect
from typing import Any

from triogroups._channel._core import _SEQNO, _STATE, _log
from triogroups._channel._delivery import Reader
from triogroups._channel._state import STATE_REQ, STATE_RSP, StateHeader, first_gap
from triogroups._errors import MessageTooLarge
from triogroups._payload import PayloadError, decode_payload, encode_payload
from triogroups.address import Address
from triogroups.message import Message

__all__ = ["StateTransfer"]


class StateTransfer(Reader):
    """State transfer for a `Channel`: the joiner's and the coordinator's side."""

    async def _ask_for_state(self) -> bool:
        """Ask the coordinator for the state; True when there is no older member to ask:
        then the caller starts without it (`Dispatcher._release`)."""
        if not self._holding:
            return False
        view = self._view
        me = self._stack.address
        if view is None or me not in view:
            return False
        coord = view.coord
        if coord == me:
            _log.info("%s: no older member to get the state from; starting without it", me)
            self._counters["state_none_to_ask"] += 1
            return True
        self._state_source = coord
        self._state_requests += 1
        self._counters["state_requests_sent"] += 1
        hdr = StateHeader(STATE_REQ, self._state_requests)
        await self._send(Message(coord, headers={_STATE: hdr}), internal=True)
        return False

    async def _serve_state(self, joiner: Address, hdr: StateHeader) -> None:
        """Answer a joiner's STATE_REQ: the state and the seqnos it contains, taken between
        two messages (`Sink.snapshot`); an empty answer without a state provider."""
        if self._provider is None:
            reply = StateHeader(STATE_RSP, hdr.seqno)
            await self._send(Message(joiner, headers={_STATE: reply}), internal=True)
            return
        provider = self._provider

        async def take() -> tuple[Any, tuple[tuple[Address, int], ...]]:
            state = provider.get_state()
            if inspect.isawaitable(state):
                state = await state
            return state, self._align.snapshot()

        state, applied = await self._sink.snapshot(take)
        try:
            try:
                payload = encode_payload(state)
            except TypeError:
                if not self.allow_pickle:
                    raise
                payload = encode_payload(state, pickle=True)
            self._check_size(len(payload))
        except (TypeError, MessageTooLarge) as exc:
            # The joiner's state_timeout reports it there; this member keeps working.
            _log.error("%s: cannot send the state to %s: %s", self.address, joiner, exc)
            self._counters["states_not_sent"] += 1
            return
        reply = StateHeader(STATE_RSP, hdr.seqno, applied, True)
        self._counters["states_served"] += 1
        await self._send(Message(joiner, payload, headers={_STATE: reply}), internal=True)

    async def _state_response(self, msg: Message, hdr: StateHeader) -> bool:
        """Apply a state that arrived; True when the transfer is done (the caller then
        hands over what was held back: `Dispatcher._release`)."""
        if self._transferred:
            self._counters["state_responses_stale"] += 1
            return False
        if hdr.has_state:
            assert self._provider is not None
            held = [
                (m.src, seqno)
                for m in self._held
                if isinstance(m, Message)
                and m.src is not None
                and (seqno := m.headers.get(_SEQNO)) is not None
            ]
            if first_gap(held, hdr.applied) is not None:
                self._counters["state_responses_behind"] += 1
                return False
            try:
                state, _ = decode_payload(msg.payload, allow_pickle=self.allow_pickle)
            except PayloadError as exc:
                self._drops.drop(f"state_{exc.reason}", str(exc), msg.src)
                return False
            done = self._provider.set_state(state)
            if inspect.isawaitable(done):
                await done
            self._align.install(hdr.applied)
        self._counters["states_received"] += 1
        return True
