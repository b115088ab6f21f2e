"""The inspector: diagnostics answers, the ``probe`` client and command.

`build_report` is one member's answer to a probe (a plain dict), `probe`
asks every member that listens and returns their answers.
"""

from triogroups.inspector._report import REPORT_VERSION, build_report

__all__ = ["REPORT_VERSION", "build_report"]
