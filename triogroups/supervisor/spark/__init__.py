"""Groups inside Spark barrier stages: every task of a stage is a member of one group.

The pattern of TorchDistributor or xgboost.spark, with a reliable group in place of a one-off
rendezvous: `run_group` runs N members as one barrier stage and returns their results;
`map_in_group` makes one member per partition of an RDD or DataFrame. Members use the `spark`
stack preset (TCP on the executor's host, discovery from one ``allGather``); see `_task` for
how a member starts and `_setup` for what the session needs. pyspark is optional (the
``spark`` extra) and imported only when a group runs.
"""

from triogroups._public import set_public_module
from triogroups.supervisor.spark._driver import map_in_group, run_group
from triogroups.supervisor.spark._setup import (
    SparkGroupError,
    SparkUnavailable,
    spark_session,
    task_slots,
)
from triogroups.supervisor.spark._task import SparkTask

__all__ = [
    "SparkGroupError",
    "SparkTask",
    "SparkUnavailable",
    "map_in_group",
    "run_group",
    "spark_session",
    "task_slots",
]

set_public_module(__name__, {name: globals()[name] for name in __all__})
del set_public_module
