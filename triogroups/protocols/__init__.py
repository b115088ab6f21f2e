"""The protocol layers, one sans-IO module each; importing registers them by name."""

from triogroups.protocols.discard import Discard
from triogroups.protocols.passthrough import PassThrough

__all__ = ["Discard", "PassThrough"]
