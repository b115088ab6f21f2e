"""Shared set-up of the process supervisor tests: fast stacks on ports of their own, stacks
as TOML files for the command, and checks that a process is gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import trio

from triogroups import StackConfig
from triogroups.testing import free_ports

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
APPS = HERE / "member_apps.py"
STEP = 60  # seconds per awaited condition: generous, a busy 2-core machine needs a few


def fast_udp(*, fd_timeout: float = 3.0) -> StackConfig:
    """The udp preset on a multicast port of its own, with short join and leave timers and
    failure detection that suspects a silent member after ``fd_timeout`` (+1 s to verify)."""
    config = StackConfig.preset("udp").configure("UDP", mcast_port=free_ports())
    config = config.configure("FD_ALL3", interval=0.5, timeout=fd_timeout)
    config = config.configure("VERIFY_SUSPECT", timeout=1.0)
    return config.configure(
        "GMS", join_timeout=1.0, view_ack_collection_timeout=1.0, leave_timeout=1.0
    )


def write_toml(config: StackConfig, path: Path) -> Path:
    """``config`` as a TOML stack file (scalar and string-list properties only)."""
    lines = []
    for layer in config.layers:
        lines += ["[[protocol]]", f"name = {json.dumps(layer.name)}"]
        lines += [f"{key} = {json.dumps(value)}" for key, value in layer.properties.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def pid_gone(pid: int) -> bool:
    """True once ``pid`` no longer runs (gone, or a zombie nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def children_of(pid: int) -> set[int]:
    """The pids whose parent is ``pid``."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


@dataclass(frozen=True)
class Ran:
    """What a command printed and how it ended."""

    status: int
    out: str
    err: str


async def run_command(*argv: str, deadline: float = 4 * STEP) -> Ran:
    """Run ``python -m triogroups.cli *argv`` from the checkout to its end (within
    ``deadline`` seconds; past it the command is killed and reaped, and its members die with
    it) with stdout and stderr apart."""
    with trio.fail_after(deadline):
        done = await trio.run_process(
            [sys.executable, "-m", "triogroups.cli", *argv],
            stdin=subprocess.DEVNULL,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
            cwd=ROOT,
            env={**os.environ, "COLUMNS": "200"},
        )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())
