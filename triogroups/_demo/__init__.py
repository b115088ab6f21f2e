"""The demo behind ``triogroups demo`` and ``python3 dev.py demo``, in one place.

- `_real`: the default demo, member processes over UDP (or TCP) on loopback under the
  supervisor, one of them SIGKILLed and restarted, with a live table and a verdict;
- `_member`: the application each of those member processes runs;
- `_check`: the verdict over the members' delivery logs (pure data in, problems out);
- `_inspect`: ``--inspect``, the real demo watched live in the inspector;
- `_sim`: ``--sim``, one process on the simulated network, replayable by its seed.

A tool, not a member: nothing below the command line imports it. This module imports
nothing, so a member process that runs `_member` loads neither the test kit (`_sim`)
nor the inspector (`_inspect`).
"""
