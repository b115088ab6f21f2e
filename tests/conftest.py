"""What every test may assume of the process it runs in."""

from __future__ import annotations

import signal

# A shell without job control starts background commands (`.ci/run &`, nohup) with SIGINT
# ignored, and Python keeps an ignored SIGINT ignored. The signal tests (open_channel takes
# unhandled signals only, and its children inherit the disposition) need the usual start:
# Python's KeyboardInterrupt handler, which an exec'd member turns back into the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
