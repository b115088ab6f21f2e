"""A member's side of diagnostics: the probe server the stack host runs beside its layers.

`serve_diagnostics` listens for probes (`_service`), `Responder` decides what
each request gets (`_responder`), `build_report` is the answer (`_report`) and
`_messages` the request and answer format the ``probe`` client shares. This
package sits below the stack host and never imports it (`DiagnosedStack` is
what it sees of a stack), nor anything of the inspector's client or UI.
"""

from triogroups._diagnostics._messages import ANY_CLUSTER
from triogroups._diagnostics._report import REPORT_VERSION, build_report
from triogroups._diagnostics._responder import DiagnosedStack, Responder
from triogroups._diagnostics._service import MAX_FRAME, serve_diagnostics

__all__ = [
    "ANY_CLUSTER",
    "MAX_FRAME",
    "REPORT_VERSION",
    "DiagnosedStack",
    "Responder",
    "build_report",
    "serve_diagnostics",
]
