"""Spark's Python worker daemon, with the member's code imported before it forks workers.

Spark starts ``python -m <spark.python.daemon.module>`` once per executor and forks a worker
from it for each Python task. pyspark's own daemon has imported only pyspark, so every fresh
worker imported triogroups (trio, msgpack, the protocols) itself: about a second per worker on
a busy machine, paid by each new member and again after a failed stage's workers were killed.
The Arrow form's workers also import pyarrow and pandas (pyspark's Arrow serializers use
both); they are imported here too when installed. Imported here once, it is all inherited by
every fork. `spark_session` names this module.
Importing must print nothing: the daemon tells the JVM its port on stdout.
"""

import contextlib

from pyspark import daemon

import triogroups.supervisor.spark._arrow  # noqa: F401  (imported once, inherited by the forks)

with contextlib.suppress(ImportError):
    import pandas  # noqa: F401
    import pyarrow  # noqa: F401

if __name__ == "__main__":
    daemon.manager()
