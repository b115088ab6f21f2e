"""The inspector: diagnostics answers, the ``probe`` client and command.

`build_report` is one member's answer to a probe (a plain dict), `probe`
asks every member that listens and returns their answers. Every stack
answers probes unless its transport's ``enable_diagnostics`` is false (see
`triogroups._diagnostics`, beside the stack host).
"""

from triogroups._diagnostics import ANY_CLUSTER, REPORT_VERSION
from triogroups.inspector._probe import probe
from triogroups.inspector._report import build_report

__all__ = ["ANY_CLUSTER", "REPORT_VERSION", "build_report", "probe"]
