"""The inspector: diagnostics answers, the ``probe`` client and command.

`build_report` is one member's answer to a probe (a plain dict), `probe`
asks every member that listens and returns their answers. Every stack
answers probes unless its transport's ``enable_diagnostics`` is false (see
`triogroups.inspector._service`).
"""

from triogroups.inspector._messages import ANY_CLUSTER
from triogroups.inspector._probe import probe
from triogroups.inspector._report import REPORT_VERSION, build_report

__all__ = ["ANY_CLUSTER", "REPORT_VERSION", "build_report", "probe"]
