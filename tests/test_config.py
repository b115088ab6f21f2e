"""Protocol properties and stack configs: bad input names what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from triogroups import PropertyError, StackConfig, preset_names
from triogroups.extend import Discard, Protocol
from triogroups.properties import Bool, Duration, Float, Int, Size, StrList, positive


class _Probe(Protocol):
    name = "TEST_PROBE"

    interval = Duration(0.5, doc="how often", check=positive, rule="> 0")
    count = Int(3, doc="how many")
    enabled = Bool(True, doc="on or off")
    buffer = Size("64KB", doc="how big")
    hosts = StrList((), doc="where")

    def __init__(self, **props: Any) -> None:
        super().__init__(**props)
        self.changed: list[str] = []

    def property_changed(self, key: str, now: float) -> None:
        self.changed.append(key)


def test_defaults_are_validated_and_converted() -> None:
    p = _Probe()
    assert p.interval == 0.5 and p.count == 3 and p.buffer == 65536 and p.hosts == ()


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("500ms", 0.5), ("2s", 2.0), ("1m", 60.0), (3, 3.0), ("0.25", 0.25), ("200us", 0.0002)],
)
def test_durations_accept_units(value: object, seconds: float) -> None:
    assert _Probe(interval=value).interval == seconds


def test_string_lists_accept_comma_separated_text() -> None:
    assert _Probe(hosts="a:1, b:2").hosts == ("a:1", "b:2")


def test_unknown_property_names_the_protocol_and_the_property() -> None:
    with pytest.raises(PropertyError, match="TEST_PROBE has no property 'intervall'"):
        _Probe(intervall=1)


def test_bad_value_names_the_rule_and_the_value() -> None:
    with pytest.raises(PropertyError, match=r"TEST_PROBE.interval must be > 0, got -1"):
        _Probe(interval=-1)


@pytest.mark.parametrize(
    ("key", "value"), [("count", "three"), ("count", True), ("enabled", 1), ("buffer", "big")]
)
def test_bad_type_names_the_property(key: str, value: object) -> None:
    with pytest.raises(PropertyError, match=f"TEST_PROBE.{key} must be"):
        _Probe(**{key: value})


def test_set_property_at_run_time_validates_and_notifies() -> None:
    p = _Probe()
    p.set_property("count", 9, now=0.0)
    assert p.count == 9 and p.changed == ["count"]
    with pytest.raises(PropertyError, match="must be > 0"):
        p.set_property("interval", 0, now=0.0)


def test_toml_stack_parses_bottom_first() -> None:
    cfg = StackConfig.from_toml(
        '[[protocol]]\nname = "SIM"\n\n[[protocol]]\nname = "DISCARD"\nup_loss = 0.5\n'
    )
    assert cfg.names() == ["SIM", "DISCARD"]
    protos = cfg.build()
    assert isinstance(protos[1], Discard) and protos[1].up_loss == 0.5


def test_toml_file_path_is_read(tmp_path: Path) -> None:
    path = tmp_path / "stack.toml"
    path.write_text('[[protocol]]\nname = "SIM"\n[[protocol]]\nname = "PASS"\n')
    assert StackConfig.resolve(str(path)).names() == ["SIM", "PASS"]


def test_toml_with_unknown_protocol_names_it() -> None:
    cfg = StackConfig.from_toml('[[protocol]]\nname = "SIM"\n[[protocol]]\nname = "NOPE"\n')
    with pytest.raises(PropertyError, match="unknown protocol 'NOPE'"):
        cfg.build()


def test_toml_with_lower_case_protocol_name_says_names_are_upper_case(tmp_path: Path) -> None:
    """Issue 12 item 12: ``name = "udp"`` says what is wrong and what was meant; issue 38
    item 7: as the file is read, naming it, so that a partial stack (no GMS, which a
    launcher checks first) still gets the hint."""
    with pytest.raises(
        PropertyError,
        match=r"^stack config: unknown protocol 'udp': protocol names are upper-case, "
        r"did you mean 'UDP'\?$",
    ):
        StackConfig.from_toml('[[protocol]]\nname = "udp"\n[[protocol]]\nname = "PASS"\n')
    partial = tmp_path / "partial.toml"
    partial.write_text('[[protocol]]\nname = "udp"\n[[protocol]]\nname = "PING"\n')
    with pytest.raises(PropertyError, match=r"^stack config in .*partial\.toml: .*'UDP'\?$"):
        StackConfig.resolve(str(partial))


def test_toml_with_misspelt_protocol_name_suggests_the_close_one() -> None:
    cfg = StackConfig.from_toml('[[protocol]]\nname = "SIM"\n[[protocol]]\nname = "UNICAST4"\n')
    with pytest.raises(
        PropertyError, match=r"unknown protocol 'UNICAST4' \(did you mean 'UNICAST3'\?"
    ):
        cfg.build()


def test_toml_with_bad_property_value_names_it() -> None:
    cfg = StackConfig.from_toml(
        '[[protocol]]\nname = "SIM"\n[[protocol]]\nname = "DISCARD"\nup_loss = 2.0\n'
    )
    with pytest.raises(PropertyError, match=r"DISCARD.up_loss must be in \[0, 1\], got 2.0"):
        cfg.build()


def test_invalid_toml_is_a_property_error() -> None:
    with pytest.raises(PropertyError, match="not valid TOML"):
        StackConfig.from_toml("[[protocol]\nname=")


def test_a_stack_must_start_with_a_transport() -> None:
    with pytest.raises(PropertyError, match="bottom layer must be a transport"):
        StackConfig.of("PASS", "SIM").build()
    with pytest.raises(PropertyError, match="SIM is a transport and must be the bottom"):
        StackConfig.of("SIM", "PASS", "SIM").build()


def test_unknown_preset_lists_the_known_ones() -> None:
    assert "sim" in preset_names()
    with pytest.raises(PropertyError, match=r"unknown stack preset 'nope'.*sim"):
        StackConfig.preset("nope")


def test_configure_insert_remove_and_replace_return_new_configs() -> None:
    base = StackConfig.of("SIM", "PASS")
    cfg = base.insert_above("SIM", "DISCARD", up_loss=0.1).configure("DISCARD", down_loss=0.2)
    assert cfg.names() == ["SIM", "DISCARD", "PASS"] and base.names() == ["SIM", "PASS"]
    assert dict(cfg.layers[1].properties) == {"up_loss": 0.1, "down_loss": 0.2}
    assert cfg.remove("DISCARD") == base
    assert cfg.replace("PASS", "DISCARD").names() == ["SIM", "DISCARD", "DISCARD"]
    with pytest.raises(PropertyError, match="stack has no protocol 'X'"):
        cfg.configure("X", a=1)


def test_a_check_helper_names_its_own_rule_in_the_error() -> None:
    from triogroups.properties import at_least, between

    class _Derived(Protocol):
        name = "TEST_DERIVED"
        floor = Int(1, doc="at least one", check=at_least(1))
        share = Float(0.5, doc="a fraction", check=between(0, 1))

    with pytest.raises(PropertyError, match=r"TEST_DERIVED.floor must be >= 1, got 0"):
        _Derived(floor=0)
    with pytest.raises(PropertyError, match=r"TEST_DERIVED.share must be in \[0, 1\], got 2"):
        _Derived(share=2)
