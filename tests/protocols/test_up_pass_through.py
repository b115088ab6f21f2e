"""The receive path's common batch: data without a layer's own header goes up as it is.

Every layer of the ``udp`` preset above the transport sees its own header
on a few control messages and passes the application's multicasts on. Such
a batch must come out of ``up`` unchanged, in order, and without a per-layer
copy (the list handed in is the list handed on: see
`triogroups.protocols._batch`), while a control message in the middle of
the batch is still taken out and the data around it keeps its order.
"""

from __future__ import annotations

from typing import Any

import pytest

from triogroups import Message
from triogroups.protocol import Protocol, protocol_class
from triogroups.protocols import ids
from triogroups.protocols.merge3 import INFO, Merge3Header
from triogroups.protocols.verify_suspect import I_AM_NOT_DEAD, VerifyHeader
from triogroups.testing import addresses, started, up_messages, view_of

A, B, C = addresses("ABC")
_FOREIGN = 64_321  # a header no layer here knows (the application's, another layer's)

#: The layers above the transport whose header data messages never carry.
_PASSING = [
    "PING",
    "MERGE3",
    "FD_ALL3",
    "VERIFY_SUSPECT",
    "UNICAST3",
    "STABLE",
    "GMS",
    "UFC",
    "MFC",
    "FRAG",
]


def _data() -> list[Message]:
    return [
        Message(None, f"{src.name}{i}".encode(), src=src, headers={_FOREIGN: i})
        for src in (B, C, B)
        for i in range(3)
    ]


def _layer(name: str) -> Protocol:
    return started(protocol_class(name)(), A, view=view_of(A, B, C))


@pytest.mark.parametrize("name", _PASSING)
def test_a_batch_without_the_layers_header_goes_up_as_the_same_list(name: str) -> None:
    layer = _layer(name)
    batch = _data()
    expected = list(batch)
    layer.up(batch, 1.0)
    out = layer.take_up()
    assert out == [batch] and out[0] is batch
    assert out[0] == expected


@pytest.mark.parametrize(
    ("name", "control"),
    [
        ("MERGE3", lambda: Message(None, src=B, headers={ids.MERGE3: Merge3Header(INFO, None)})),
        (
            "VERIFY_SUSPECT",
            lambda: Message(A, src=B, headers={ids.VERIFY_SUSPECT: VerifyHeader(I_AM_NOT_DEAD)}),
        ),
    ],
)
def test_a_control_message_amid_data_is_taken_out_and_the_data_keeps_its_order(
    name: str, control: Any
) -> None:
    layer = _layer(name)
    batch = _data()
    expected = list(batch)
    batch.insert(4, control())
    layer.up(batch, 1.0)
    assert up_messages(layer) == expected
