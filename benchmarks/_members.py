"""Member processes for the protocol benchmarks: one `Stack` per process, over real sockets.

`bench_unicast.py` and `bench_multicast.py` describe each member as a spec
(its layers, its role, message size, sending time) and `run_group` starts
one process per member (this file run as a script), then drives them with
JSON lines:

1. each member starts its stack and reports ``uuid``, ``name`` and ``port``
   (its physical address, taken from the transport's LocalPhysicalAddress);
2. the driver sends everyone the roster; each member tells its transport
   where the others are (AddPhysicalAddress), installs the view of all of
   them (view id 1, first member coordinates: what a test installs by
   hand, so NAKACK2 and MCAST start every window at 0) and says ``ready``;
3. once all are ready, the driver says ``go``; each member plays its role
   and reports one result line, then keeps its stack running (to answer
   acks, retransmission requests and credit requests of the others) until
   its stdin closes.

The same code hosts the transport-only baseline and the protocol stacks,
so the two differ only in the layers. Roles:

- ``send``: unicast batches of ``batch`` messages to the second member for
  ``seconds``; reports how many were sent.
- ``recv``: count messages delivered; reports the count and the time between
  the first and the last, once nothing came for ``idle`` seconds.
- ``ping`` / ``pong``: request/response round trips of one message each way
  for ``seconds``; ping reports the round-trip times in microseconds.
- ``mcast``: multicast batches for ``seconds`` while counting every delivery
  (its own multicasts included); reports like ``recv``, plus how many it sent.

Every result carries the peak RSS (``ru_maxrss``) and, if ``sample`` > 0, the
RSS every ``sample`` seconds. With ``BENCH_PROFILE=<dir>`` in the environment
each member runs under cProfile and writes ``<dir>/<label>-<name>-<role>.prof``.
"""

from __future__ import annotations

import cProfile
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio
from _procs import DIE_WITH_PARENT

from triogroups import Address, Message, Stack, StackConfig
from triogroups.events import AddPhysicalAddress, LocalPhysicalAddress, ViewChange
from triogroups.runtime import tune_gc
from triogroups.view import View, ViewId

ROOT = Path(__file__).resolve().parent.parent
_PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def rss_kb() -> int:
    """This process's resident set size now, in KiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE_KB


def peak_rss_kb() -> int:
    """The peak resident set size of this process so far, in KiB (Linux ru_maxrss)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


# --- the member side ---------------------------------------------------------------------


class _Member:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        layers = [(name, props) for name, props in spec["layers"]]
        self.stack = Stack(StackConfig.of(*layers), spec["cluster"], spec["name"])
        self.size = int(spec["size"])
        self.batch = int(spec["batch"])
        self.seconds = float(spec["seconds"])
        self.idle = float(spec["idle"])
        self.roster: list[Address] = []
        self.samples: list[int] = []
        self.count = 0
        self.first = self.last = 0.0
        self.first_cpu = self.last_cpu = 0.0
        self.sent = 0
        self.sending_done = False
        self.send_busy = 0.0  # CPU time over wall time while sending
        self.send_cpu = 0.0  # CPU seconds while sending

    async def _line(self) -> dict[str, Any] | None:
        line = await trio.to_thread.run_sync(sys.stdin.readline)
        return json.loads(line) if line else None

    async def run(self) -> None:
        stack = self.stack
        async with trio.open_nursery() as nursery:
            await nursery.start(stack.run)
            physical = None
            while physical is None:
                item = await stack.receive()
                if isinstance(item, LocalPhysicalAddress):
                    physical = item.physical
            me = stack.address
            _emit(uuid=f"{me.uuid:032x}", name=me.name, port=physical[1])
            command = await self._line()
            assert command is not None
            await self._join(command["roster"])
            _emit(ready=True)
            command = await self._line()
            assert command is not None and command.get("go")
            if self.spec.get("sample"):
                nursery.start_soon(self._sample, float(self.spec["sample"]))
            role = getattr(self, f"_role_{self.spec['role']}")
            nursery.start_soon(role)
            await self._line()  # stdin closes: the run is over
            nursery.cancel_scope.cancel()

    async def _join(self, roster: list[list[Any]]) -> None:
        me = self.stack.address
        self.roster = [Address(int(uuid, 16), name) for uuid, name, _ in roster]
        for address, (_, _, port) in zip(self.roster, roster, strict=True):
            if address != me:
                await self.stack.send(AddPhysicalAddress(address, ("127.0.0.1", port)))
        view = View(ViewId(1, self.roster[0]), self.roster)
        await self.stack.send(ViewChange(view))
        await trio.sleep(0.3)  # every layer has the view before anyone sends

    def _peer(self) -> Address:
        me = self.stack.address
        return next(a for a in self.roster if a != me)

    def _result(self, **fields: Any) -> None:
        _emit(peak_rss_kb=peak_rss_kb(), rss_kb=self.samples, **fields)

    async def _sample(self, interval: float) -> None:
        while True:
            self.samples.append(rss_kb())
            await trio.sleep(interval)

    async def _send_for(self, dest: Address | None) -> None:
        stack = self.stack
        payload = bytes(self.size)
        batch = self.batch
        start, start_cpu = time.perf_counter(), time.process_time()
        deadline = start + self.seconds
        while time.perf_counter() < deadline:
            await stack.send([Message(dest, payload) for _ in range(batch)])
            self.sent += batch
        self.send_cpu = time.process_time() - start_cpu
        self.send_busy = self.send_cpu / (time.perf_counter() - start)
        self.sending_done = True

    async def _count(self) -> None:
        """Count delivered messages for ever (a member must keep reading its stack)."""
        async for item in self.stack.deliveries:
            if type(item) is list:
                self.last = time.perf_counter()
                self.last_cpu = time.process_time()
                if not self.first:
                    self.first, self.first_cpu = self.last, self.last_cpu
                self.count += len(item)

    async def _until_idle(self) -> None:
        """Return once deliveries started and then stopped for ``idle`` seconds."""
        deadline = trio.current_time() + 60 + self.seconds
        while trio.current_time() < deadline:
            await trio.sleep(0.05)
            quiet = time.perf_counter() - self.last >= self.idle
            if self.first and quiet and (self.sending_done or self.spec["role"] == "recv"):
                return

    def _report_counts(self) -> None:
        self._result(
            count=self.count,
            seconds=self.last - self.first,
            cpu_seconds=self.last_cpu - self.first_cpu,
            sent=self.sent,
        )

    async def _role_send(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._count)
            await self._send_for(self._peer())
            self._result(sent=self.sent, busy=self.send_busy, cpu_seconds=self.send_cpu)

    async def _role_recv(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._count)
            await self._until_idle()
            self._report_counts()

    async def _role_mcast(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._count)
            nursery.start_soon(self._send_for, None)
            await self._until_idle()
            self._report_counts()

    async def _role_ping(self) -> None:
        stack = self.stack
        peer = self._peer()
        payload = bytes(self.size)
        rtts: list[float] = []
        deadline = time.perf_counter() + self.seconds
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            await stack.send([Message(peer, payload)])
            while type(await stack.receive()) is not list:
                pass
            rtts.append((time.perf_counter() - start) * 1e6)
        self._result(rtts_us=rtts)

    async def _role_pong(self) -> None:
        self._result()
        async for item in self.stack.deliveries:
            if type(item) is list:
                await self.stack.send([Message(m.src, m.payload) for m in item])


def member_main(spec: dict[str, Any]) -> None:
    tune_gc()
    member = _Member(spec)
    folder = os.environ.get("BENCH_PROFILE")
    if not folder:
        trio.run(member.run)
        return
    profile = cProfile.Profile()
    profile.runcall(trio.run, member.run)
    name = f"{spec['label']}-{spec['name']}-{spec['role']}.prof".replace("/", "_")
    profile.dump_stats(os.path.join(folder, name))


# --- the driver side ---------------------------------------------------------------------


class _Process:
    def __init__(self, spec: dict[str, Any]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), json.dumps(spec)],
            preexec_fn=DIE_WITH_PARENT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"member process exited with {self.proc.wait()}")
        result: dict[str, Any] = json.loads(line)
        return result

    def tell(self, **fields: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(fields) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_group(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run one member process per spec through hello, roster, ready and go; their results."""
    members = [_Process(spec) for spec in specs]
    try:
        hellos = [m.read() for m in members]
        roster = [[h["uuid"], h["name"], h["port"]] for h in hellos]
        for m in members:
            m.tell(roster=roster)
        for m in members:
            m.read()
        for m in members:
            m.tell(go=True)
        return [m.read() for m in members]
    finally:
        for m in members:
            m.close()


if __name__ == "__main__":
    member_main(json.loads(sys.argv[1]))
