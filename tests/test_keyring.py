"""Shared-secret mode in the codec: sealed bundles, and every way one is refused.

A tampered, replayed, wrongly keyed or plain bundle is refused with its own
`WireError` reason (the transports count those as ``decode_errors``); a
rollover accepts both keys for its window and then refuses the old one.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from triogroups import Address, Message
from triogroups._keyring import NONCE_PREFIX_SIZE, REPLAY_WINDOW, SEAL_SLOT, Keyring, key_id
from triogroups.wire import SEALED, WireCodec, WireError

A = Address.random("A")
SECRET = b"correct horse battery staple"
OTHER = b"another secret of enough bytes"
CLUSTER = "crypt"
SLOT_AT = 5 + len(CLUSTER)  # magic, version, flags, name length, name
KEY_ID = slice(SLOT_AT + 1, SLOT_AT + 5)
NONCE = slice(SLOT_AT + 5, SLOT_AT + 1 + SEAL_SLOT)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _pair(
    secret: bytes = SECRET, theirs: bytes | None = None, cluster: str = CLUSTER
) -> tuple[WireCodec, WireCodec, Clock]:
    clock = Clock()
    sender = WireCodec(cluster, keyring=Keyring(cluster, secret, clock=clock))
    receiver = WireCodec(CLUSTER, keyring=Keyring(CLUSTER, theirs or secret, clock=clock))
    return sender, receiver, clock


def _bundle(codec: WireCodec, payload: bytes = b"secret payload") -> bytes:
    return codec.encode(None, A, [Message(None, payload)])


def _reason(codec: WireCodec, data: bytes) -> str:
    with pytest.raises(WireError) as info:
        codec.decode(data)
    return info.value.reason


def test_sealed_bundle_round_trips_and_hides_its_body() -> None:
    """A sealed bundle decodes with the same secret; neither payload nor the sender's
    name is readable on the wire, the cluster name is (authenticated, not hidden)."""
    sender, receiver, _ = _pair()
    data = _bundle(sender)
    assert data[3] == SEALED
    assert b"secret payload" not in data and A.to_bytes() not in data
    assert data[5:SLOT_AT] == CLUSTER.encode()
    bundle = receiver.decode(data)
    assert bundle.src == A and bundle.messages[0].payload == b"secret payload"


def test_sealed_bundle_decodes_from_a_memoryview() -> None:
    """TCP hands the codec memoryviews of its read buffer."""
    sender, receiver, _ = _pair()
    assert receiver.decode(memoryview(_bundle(sender))).messages[0].payload == b"secret payload"


@given(st.data())
def test_any_flipped_bit_is_refused(data: st.DataObject) -> None:
    """Tampering anywhere (prefix, key id, nonce, ciphertext, tag) is refused, never decoded."""
    sender, receiver, _ = _pair()
    good = bytearray(_bundle(sender))
    index = data.draw(st.integers(0, len(good) - 1))
    good[index] ^= 1 << data.draw(st.integers(0, 7))
    with pytest.raises(WireError):
        receiver.decode(bytes(good))


def test_tampered_ciphertext_is_auth() -> None:
    sender, receiver, _ = _pair()
    data = bytearray(_bundle(sender))
    data[-20] ^= 0x40
    assert _reason(receiver, bytes(data)) == "auth"


def test_tampered_cluster_name_is_refused() -> None:
    """The cluster name is associated data: a bundle re-labelled for another cluster
    (same secret, same name length) fails there as ``auth``."""
    sender, _, clock = _pair()
    data = _bundle(sender).replace(b"crypt", b"crypu", 1)
    other = WireCodec("crypu", keyring=Keyring("crypu", SECRET, clock=clock))
    assert _reason(other, data) in ("auth", "unknown_key")


def test_replayed_bundle_is_refused() -> None:
    sender, receiver, _ = _pair()
    data = _bundle(sender)
    receiver.decode(data)
    assert _reason(receiver, data) == "replay"


def test_reused_nonce_is_refused() -> None:
    """A second, different bundle under a nonce already seen: dropped as a replay."""
    sender, receiver, _ = _pair()
    first = _bundle(sender, b"one")
    sender.keyring._counter -= 1  # type: ignore[union-attr]  # force the nonce again
    second = _bundle(sender, b"two")
    assert first[NONCE] == second[NONCE] and first != second
    receiver.decode(first)
    assert _reason(receiver, second) == "replay"


def test_reordered_bundles_within_the_window_pass_old_ones_do_not() -> None:
    sender, receiver, _ = _pair()
    bundles = [_bundle(sender, b"%d" % i) for i in range(3)]
    for i in (2, 0, 1):
        assert receiver.decode(bundles[i]).messages[0].payload == b"%d" % i
    late = _bundle(sender, b"late")
    sender.keyring._counter += REPLAY_WINDOW  # type: ignore[union-attr]
    receiver.decode(_bundle(sender, b"far ahead"))
    assert _reason(receiver, late) == "replay"


def test_restarted_member_uses_a_new_nonce_prefix() -> None:
    """A new keyring (a new incarnation) never starts on the nonces of the last one."""
    one = Keyring(CLUSTER, SECRET, clock=Clock())
    two = Keyring(CLUSTER, SECRET, clock=Clock())
    assert one._prefix != two._prefix and len(one._prefix) == NONCE_PREFIX_SIZE


def test_wrong_secret_is_unknown_key() -> None:
    sender, receiver, _ = _pair(OTHER, SECRET)
    assert _reason(receiver, _bundle(sender)) == "unknown_key"


def test_same_secret_other_cluster_has_other_key() -> None:
    """HKDF takes the cluster name: one secret, a different key (and id) per cluster."""
    assert key_id(SECRET, "one") != key_id(SECRET, "two")


def test_forged_key_id_with_a_wrong_key_is_auth() -> None:
    """An outsider who copies a valid key id still fails the tag."""
    outsider, receiver, _ = _pair(OTHER, SECRET)
    data = bytearray(_bundle(outsider))
    data[KEY_ID] = key_id(SECRET, CLUSTER)
    assert _reason(receiver, bytes(data)) == "auth"


def test_plain_and_sealed_do_not_mix() -> None:
    """A member without the secret refuses sealed bundles, a sealed member plain ones."""
    sender, receiver, _ = _pair()
    plain = WireCodec(CLUSTER)
    assert _reason(plain, _bundle(sender)) == "auth"
    assert _reason(receiver, _bundle(plain)) == "auth"


def test_key_id_is_in_the_wire_prefix() -> None:
    sender, _, _ = _pair()
    data = _bundle(sender)
    assert data[SLOT_AT] == SEAL_SLOT
    assert data[KEY_ID] == key_id(SECRET, CLUSTER)


def test_rollover_accepts_both_keys_then_refuses_the_old() -> None:
    """Install at t=0 with rollover 10: the new key is accepted at once, senders
    switch at 5, the old key is refused from 10."""
    clock = Clock()
    a = WireCodec(CLUSTER, keyring=Keyring(CLUSTER, SECRET, clock=clock))
    b = WireCodec(CLUSTER, keyring=Keyring(CLUSTER, SECRET, clock=clock))
    assert a.keyring is not None and b.keyring is not None
    a.keyring.install(OTHER, 10.0)
    old_from_a = _bundle(a)
    assert old_from_a[KEY_ID] == key_id(SECRET, CLUSTER)  # not switched yet
    b.decode(old_from_a)
    b.keyring.install(OTHER, 10.0)
    clock.now = 5.0
    new_from_a = _bundle(a)
    assert new_from_a[KEY_ID] == key_id(OTHER, CLUSTER)
    b.decode(new_from_a)
    old_late = _bundle(WireCodec(CLUSTER, keyring=Keyring(CLUSTER, SECRET, clock=clock)))
    clock.now = 9.9
    b.decode(old_late)
    clock.now = 10.0
    again = _bundle(WireCodec(CLUSTER, keyring=Keyring(CLUSTER, SECRET, clock=clock)))
    assert _reason(b, again) == "unknown_key"
    assert b.keyring.key_ids() == [key_id(OTHER, CLUSTER).hex()]
    assert b.keyring.stats()["retired"] == 1


def test_installing_the_current_secret_again_is_refused() -> None:
    keyring = Keyring(CLUSTER, SECRET, clock=Clock())
    with pytest.raises(ValueError, match="already installed"):
        keyring.install(SECRET, 1.0)


def test_short_or_non_bytes_secret_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 16 bytes, got 5"):
        Keyring(CLUSTER, b"short", clock=Clock())
    with pytest.raises(TypeError, match="secret must be bytes"):
        Keyring(CLUSTER, "text" * 8, clock=Clock())  # type: ignore[arg-type]


def test_keyring_never_shows_its_secret() -> None:
    keyring = Keyring(CLUSTER, SECRET, clock=Clock())
    shown = repr(keyring) + repr(keyring.stats())
    assert SECRET.decode() not in shown and SECRET.hex() not in shown


@given(st.binary(max_size=300))
def test_fuzz_random_bytes_after_a_sealed_prefix_raise_only_wire_error(rest: bytes) -> None:
    """Whatever follows a valid sealed prefix (a slot of any length, any key id, any
    nonce and body), decoding raises WireError and nothing else."""
    _, receiver, _ = _pair()
    with pytest.raises(WireError):
        receiver.decode(receiver._prefix + rest)


@given(st.integers(0, 120))
def test_fuzz_truncated_sealed_bundles_raise_only_wire_error(cut: int) -> None:
    sender, receiver, _ = _pair()
    data = _bundle(sender)
    with pytest.raises(WireError):
        receiver.decode(data[: min(cut, len(data) - 1)])
