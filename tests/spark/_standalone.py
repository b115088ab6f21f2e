"""A real Spark standalone cluster on loopback, from the installed pyspark, for the
``sparkcluster`` tier: one master and two workers, each its own JVM started here.

Each JVM is started with ``java -cp $SPARK_HOME/jars/*`` directly (what ``spark-class``
execs after its launcher JVM, without that second start) in a session of its own, so every
process it starts later (executor JVMs, their Python daemons and workers, even reparented
ones) keeps that session id: `processes` finds them all by it, and `StandaloneCluster.stop`
ends them all and checks that none is left (a worker in a network namespace starts through
``ip netns exec``, which execs java in its own place: the same process and session). Logs go
to the cluster's directory.

The workers get the repository on ``PYTHONPATH``: triogroups installed on every node, as a
cluster needs it (the executors' Python workers import it before any stage runs).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from triogroups.testing import free_ports

__all__ = [
    "JVM_OPTIONS",
    "StandaloneCluster",
    "driver_env",
    "processes",
    "spark_home",
    "write_driver_only",
]

ROOT = Path(__file__).resolve().parents[2]
# Every JVM of a test cluster: its master and workers, and through JAVA_TOOL_OPTIONS the
# executors its workers start and a driver given `driver_env` (a driver and executors that
# took Java's defaults, G1 and C2, cost 15 s more CPU for one `triogroups spark` run).
JVM_OPTIONS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]


def driver_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for a driver whose JVM (started by pyspark) should run with `JVM_OPTIONS`."""
    return {**env, "JAVA_TOOL_OPTIONS": " ".join(JVM_OPTIONS)}


_START_TIMEOUT = 120.0  # seconds for the master and both workers (a loaded 2-core machine)
_STOP_TIMEOUT = 30.0


def spark_home() -> Path:
    """The installed pyspark's directory: its ``jars`` run the master and the workers."""
    import pyspark

    return Path(pyspark.__file__).parent


# Member code only a driver has (issue 39): the workers' PYTHONPATH has the repository, never
# the directory these are written to, so their tasks import them only if the driver sent them.
_DRIVER_ONLY = {
    "drivermod.py": """
import os

async def member(ch, task):
    return [task.partition, [m.name for m in ch.view.members], os.path.abspath(__file__)]
""",
    "climod.py": """
async def member(ch, task, word="hi"):
    return f"{word} from p{task.partition} of {len(ch.view)} in {__file__}"
""",
    "driverpkg/__init__.py": "",
    "driverpkg/helpers.py": """
def label(partition):
    return f"helped p{partition}"
""",
    "driverpkg/members.py": """
from driverpkg.helpers import label

async def member(ch, task):
    return [task.partition, label(task.partition), __file__]
""",
    "nspkg/members.py": """
async def member(ch, task):
    return task.partition
""",
}


def write_driver_only(directory: Path) -> Path:
    """Write the driver-only modules into ``directory`` (a top-level module ``drivermod``,
    ``climod`` for the CLI, a package ``driverpkg`` whose ``members`` imports its sibling
    ``helpers``, and ``nspkg.members`` in a namespace package) and return ``directory``."""
    for name, text in _DRIVER_ONLY.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip())
    return directory


def _scala_version(home: Path) -> str:
    """The Scala version of the installed jars (``2.13``): the workers' executor launcher
    needs it (``bin/load-spark-env.sh`` sets it for the scripts) to find the jars."""
    jar = next((home / "jars").glob("spark-core_*.jar"))
    return jar.name.split("_", 1)[1].split("-", 1)[0]


def processes(sessions: set[int], zombies: bool = False) -> dict[int, str]:
    """The live processes (pid: command line) whose session id is one of ``sessions``; with
    ``zombies``, the exited ones not yet reaped too."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if (fields[0] == "Z" and not zombies) or int(fields[3]) not in sessions:
                continue
            found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found


class StandaloneCluster:
    """A master on ``host`` and ``workers`` workers of ``cores`` cores each, on 127.0.0.1
    unless `start_worker` is told another host (`start` may start fewer, `start_worker` the
    others later). The master's web UI, which `status` reads, listens on every address."""

    def __init__(
        self, directory: Path, workers: int = 2, cores: int = 2, host: str = "127.0.0.1"
    ) -> None:
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.host = host
        port = free_ports(2)
        self.master_port, self.ui_port = port, port + 1
        self.url = f"spark://{host}:{self.master_port}"
        self._procs: list[subprocess.Popen[bytes]] = []

    @property
    def sessions(self) -> set[int]:
        return {proc.pid for proc in self._procs}

    def _java(
        self, name: str, main: str, *args: str, prefix: tuple[str, ...] = (), **extra: str
    ) -> None:
        home = spark_home()
        env = {
            **os.environ,
            **extra,
            "SPARK_HOME": str(home),
            "SPARK_SCALA_VERSION": _scala_version(home),
            "SPARK_LOG_DIR": str(self.directory),
            "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p
            ),
            # inherited by every executor a worker starts, whatever its application asked
            "JAVA_TOOL_OPTIONS": " ".join(JVM_OPTIONS),
        }
        command = [*prefix, "java", "-Xmx256m", *JVM_OPTIONS, "-cp", f"{home}/jars/*"]
        command += ["-Dspark.master.rest.enabled=false", main, *args]
        with open(self.directory / f"{name}.log", "wb") as log:
            self._procs.append(
                subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.directory,
                    start_new_session=True,
                )
            )

    def status(self) -> dict[str, Any]:
        """The master's status page as JSON (workers, cores, applications)."""
        url = f"http://127.0.0.1:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=5) as answer:
            status: dict[str, Any] = json.load(answer)
        return status

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a spark JVM exited ({proc.returncode}) before {what}")
            try:
                if ready(self.status()):
                    return
            except (OSError, ValueError, http.client.HTTPException):
                # A master still starting can accept the connection and answer with
                # an empty or cut-off page: not ready yet, ask again.
                pass
            time.sleep(0.2)
        raise RuntimeError(f"no {what} within {_START_TIMEOUT:g} s (logs in {self.directory})")

    def start(self, workers: int | None = None) -> StandaloneCluster:
        """Start the master, wait until it answers, then ``workers`` workers (all by
        default); return once each registered (workers started before the master is up
        retry only after several seconds)."""
        master = "org.apache.spark.deploy.master.Master"
        self._java("master", master, "--host", self.host, "--port", str(self.master_port),
                   "--webui-port", str(self.ui_port))  # fmt: skip
        self._wait(lambda status: status.get("status") == "ALIVE", "master")
        for _ in range(self.workers if workers is None else workers):
            self.start_worker()
        return self

    def start_worker(
        self, host: str = "127.0.0.1", namespace: str | None = None, wait: bool = True
    ) -> None:
        """Start one more worker on ``host`` (in network namespace ``namespace``, with
        ``SPARK_LOCAL_IP`` there for everything it starts) and return once the master lists
        it as alive (at once without ``wait``: `wait_workers` waits for it later)."""
        i = len(self._procs) - 1
        work = self.directory / f"worker{i}"
        work.mkdir(exist_ok=True)
        inside = {} if namespace is None else {"SPARK_LOCAL_IP": host}
        prefix = () if namespace is None else ("ip", "netns", "exec", namespace)
        self._java(f"worker{i}", "org.apache.spark.deploy.worker.Worker",
                   "--host", host, "--port", "0", "--webui-port", "0",
                   "--cores", str(self.cores), "--memory", "2g", "--work-dir", str(work),
                   self.url, prefix=prefix, **inside)  # fmt: skip
        if wait:
            self.wait_workers(i + 1)

    def wait_workers(self, count: int) -> None:
        """Return once the master lists ``count`` workers as alive."""
        self._wait(
            lambda status: sum(w["state"] == "ALIVE" for w in status["workers"]) >= count,
            f"{count} workers",
        )

    def stop(self) -> dict[int, str]:
        """Stop every JVM (SIGTERM, SIGKILL after a grace period) and everything they
        started; return the processes still alive after that (none, unless broken)."""
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        deadline = time.monotonic() + _STOP_TIMEOUT
        while processes(self.sessions, zombies=True) and time.monotonic() < deadline:
            time.sleep(0.2)  # a killed JVM's children exit and are reaped moments later
        left = processes(self.sessions)
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # ours: started in one of our sessions
        return left
