"""Spark's Python worker daemon, with the member's code imported before it forks workers.

Spark starts ``python -m <spark.python.daemon.module>`` once per executor and forks a worker
from it for each Python task. pyspark's own daemon has imported only pyspark, so every fresh
worker imported triogroups (trio, msgpack, the protocols) itself: about a second per worker on
a busy machine, paid by each new member and again after a failed stage's workers were killed.
Imported here once, it is inherited by every fork. `spark_session` names this module.
Importing must print nothing: the daemon tells the JVM its port on stdout.
"""

from pyspark import daemon

import triogroups.supervisor.spark._task  # noqa: F401  (imported once, inherited by the forks)

if __name__ == "__main__":
    daemon.manager()
