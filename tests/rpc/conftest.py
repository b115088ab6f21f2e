"""RPC runs over channels: the channel tests' network and stack fixtures."""

from tests.channel.conftest import STACK, net, stack

__all__ = ["STACK", "net", "stack"]
