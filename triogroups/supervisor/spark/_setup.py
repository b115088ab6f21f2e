"""What a Spark group needs from its surroundings: pyspark, Java, a session, enough slots.

Everything here runs on the driver, before a stage starts, so a missing piece is one line
naming what to install rather than a JVM traceback or a ten-minute wait. pyspark is imported
lazily: ``import triogroups`` must work without the ``spark`` extra.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from triogroups._error_root import TriogroupsError

__all__ = [
    "SESSION_CONF",
    "SparkGroupError",
    "SparkUnavailable",
    "defaults_master",
    "find_java",
    "master_slots",
    "registered_slots",
    "require_arrow",
    "require_pyspark",
    "session_master",
    "spark_session",
    "submit_args_master",
    "task_slots",
]

# Spark's defaults that hurt a group: a barrier stage with more tasks than slots waits ten
# minutes (40 checks, 15 s apart) before failing, and barrier()/allGather() wait up to a year.
# Both are read when the SparkContext starts, so they belong to the session.
SESSION_CONF: dict[str, str] = {
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "1",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "1s",
    "spark.barrier.sync.timeout": "300s",
    # A task's barrier()/allGather() opens a local socket to its executor's JVM and gives up
    # after this long without an answer (15 s by default, handed to the Python workers as
    # SPARK_AUTH_SOCKET_TIMEOUT); a JVM busy on a loaded machine can take longer to accept
    # (seen in CI: the stage failed with CANNOT_OPEN_SOCKET).
    "spark.python.authenticate.socketTimeout": "120s",
    # Python workers forked with triogroups already imported (see `_daemon`).
    "spark.python.daemon.module": "triogroups.supervisor.spark._daemon",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}

_INSTALL = "pip install triogroups[spark]"


class SparkUnavailable(TriogroupsError, RuntimeError):
    """pyspark or Java is missing; the message names what to install."""


class SparkGroupError(TriogroupsError, RuntimeError):
    """A group in a Spark barrier stage could not run or a member failed.

    ``member`` is the failing member's partition (None when the stage did not start), and the
    message carries that member's traceback as it was formatted in its task.
    """

    def __init__(self, message: str, member: int | None = None) -> None:
        super().__init__(message)
        self.member = member

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.member))


def require_pyspark() -> None:
    """Raise SparkUnavailable unless pyspark imports."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkUnavailable(f"spark groups need pyspark: {_INSTALL}") from None


def require_arrow(df: Any) -> None:
    """Raise SparkUnavailable unless pyarrow and pandas import at versions pyspark accepts and
    ``df.mapInArrow`` takes ``barrier`` (pyspark 3.5+)."""
    import pyspark
    from pyspark.sql.pandas.utils import (
        require_minimum_pandas_version,
        require_minimum_pyarrow_version,
    )

    try:
        require_minimum_pyarrow_version()
        require_minimum_pandas_version()
    except ImportError as exc:
        why = str(exc).strip().splitlines()[0]
        raise SparkUnavailable(f"arrow=True needs pyarrow and pandas ({why}): {_INSTALL}") from None
    if "barrier" not in inspect.signature(df.mapInArrow).parameters:
        raise SparkUnavailable(
            f"arrow=True needs barrier mapInArrow (pyspark 3.5+), got pyspark "
            f"{pyspark.__version__}: {_INSTALL}"
        )


def find_java() -> str:
    """The java executable pyspark will start (JAVA_HOME first, then PATH), or SparkUnavailable."""
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file():
            return str(java)
        raise SparkUnavailable(f"spark needs Java 17+: JAVA_HOME={home} has no bin/java")
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailable("spark needs Java 17+: no java on PATH and JAVA_HOME is not set")
    return found


def _worker_python_path() -> str:
    """The driver's import path, for Python workers to import what the driver imports (as
    member processes of `open_process_group` get the supervisor's ``sys.path``)."""
    entries = [p or os.getcwd() for p in sys.path]
    old = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join(p for p in dict.fromkeys([*entries, *old.split(os.pathsep)]) if p)


LOCAL_MASTER = "local[4]"

# A Java properties line: the key, then whitespace, "=" or ":" (spark-defaults.conf).
_PROPERTY = re.compile(r"^([^\s=:]+)\s*[=:\s]\s*(.*?)\s*$")


def _spark_conf_dir() -> Path | None:
    """Where ``spark-submit`` reads ``spark-defaults.conf``: ``SPARK_CONF_DIR``, else the
    ``conf`` of ``SPARK_HOME``, else of the installed pyspark (what pyspark launches)."""
    if os.environ.get("SPARK_CONF_DIR"):
        return Path(os.environ["SPARK_CONF_DIR"])
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"]) / "conf"
    spec = importlib.util.find_spec("pyspark")  # a pip-installed pyspark is its own home
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / "conf"


def submit_args_master() -> str | None:
    """``--master`` in ``PYSPARK_SUBMIT_ARGS``, the arguments pyspark hands the
    ``spark-submit`` it launches for a session started here; None when not given."""
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    for i, arg in enumerate(args):
        if arg == "--master" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--master="):
            return arg.split("=", 1)[1]
    return None


def defaults_master() -> str | None:
    """``spark.master`` in the ``spark-defaults.conf`` that ``spark-submit`` reads; None
    when there is none or it does not name a master."""
    directory = _spark_conf_dir()
    defaults = None if directory is None else directory / "spark-defaults.conf"
    if defaults is None or not defaults.is_file():
        return None
    for line in defaults.read_text(errors="replace").splitlines():
        match = _PROPERTY.match(line.strip())
        if match and match.group(1) == "spark.master" and match.group(2):
            return match.group(2)
    return None


def session_master(
    master: str | None = None, conf: dict[str, str] | None = None, local: str = LOCAL_MASTER
) -> str | None:
    """The master a session is given: ``master`` when not None, then ``spark.master`` in
    ``conf``, then none at all under ``spark-submit`` (None: its ``--master``, its
    ``spark-defaults.conf`` or its own default stand, as Spark's do), then ``--master`` in
    ``PYSPARK_SUBMIT_ARGS``, then the ``SPARK_MASTER`` environment variable, then
    ``spark.master`` in ``spark-defaults.conf``, and ``local`` only when none of these says
    (a local default must never hide a master that Spark's own configuration names)."""
    if master:
        return master
    if conf and conf.get("spark.master"):
        return conf["spark.master"]
    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # set for the driver spark-submit started
        return None
    return submit_args_master() or os.environ.get("SPARK_MASTER") or defaults_master() or local


def spark_session(
    master: str | None = None, app_name: str = "triogroups", conf: dict[str, str] | None = None
) -> Any:
    """A SparkSession ready for groups (`getOrCreate`: an existing session is returned as is).

    The master is ``master`` when given, else ``spark.master`` in ``conf``, else the one
    ``spark-submit`` was given (this driver runs under it), else ``--master`` in
    ``PYSPARK_SUBMIT_ARGS``, else ``SPARK_MASTER``, else ``spark.master`` in
    ``spark-defaults.conf``, else ``local[4]`` (`session_master`). Checks pyspark and Java
    first (SparkUnavailable, one line). Python workers run this interpreter with the
    driver's ``sys.path`` (``PYSPARK_PYTHON``, ``PYTHONPATH``; on a cluster the executors'
    own environment decides what they import), slot checks fail within seconds instead of
    ten minutes, ``allGather()`` and the members' meeting at the end wait at most 300 s
    (``spark.barrier.sync.timeout``; a task waits up to 120 s, not 15, for its executor's
    JVM to accept its local socket), Python workers start with triogroups imported, and the
    web UI and progress bar are off. ``conf`` adds or overrides Spark settings.
    """
    require_pyspark()
    find_java()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ["PYTHONPATH"] = _worker_python_path()
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    chosen = session_master(master, conf)
    if chosen is not None:
        builder = builder.master(chosen)
    for key, value in {**SESSION_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


_LOCAL = re.compile(r"^local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]$")


def master_slots(master: str, task_cpus: int = 1) -> int | None:
    """How many tasks a master runs at once when its string says (``local[N]``, ``local[*]``,
    ``local-cluster[E,C,M]``), before any session starts; None for a cluster manager
    (``spark://``, ``yarn``, ``k8s://``), whose slots are the executors that registered."""
    local = _LOCAL.match(master)
    if local:
        threads = local.group(1) or "1"
        return (os.cpu_count() or 1) if threads == "*" else int(threads) // task_cpus
    cluster = _LOCAL_CLUSTER.match(master)
    if cluster:
        return int(cluster.group(1)) * (int(cluster.group(2)) // task_cpus)
    return None


def task_slots(sc: Any) -> int:
    """How many tasks ``sc`` runs at once: what a barrier stage may ask for.

    Read from the master for ``local[N]`` and ``local-cluster[E,C,M]`` (known before any
    executor registered), otherwise Spark's own count of concurrent tasks over the executors
    that registered so far (on a cluster manager more may register later).
    """
    cpus = int(sc.getConf().get("spark.task.cpus", "1"))
    known = master_slots(str(sc.master), cpus)
    return registered_slots(sc) if known is None else known


def registered_slots(sc: Any) -> int:
    """Spark's own count of the tasks ``sc`` can run at once on the executors registered so
    far: what its scheduler checks a barrier stage against when the stage is submitted."""
    jsc = sc._jsc.sc()
    profile = jsc.resourceProfileManager().defaultResourceProfile()
    return int(jsc.maxNumConcurrentTasks(profile))
