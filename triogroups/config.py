"""Stack configurations: named presets, TOML files, and overrides.

A stack is a list of layers from the transport (bottom) up, each a
registered protocol name with property values. TOML form::

    [[protocol]]
    name = "UDP"
    bind_addr = "127.0.0.1"

    [[protocol]]
    name = "UNICAST3"
    xmit_interval = "500ms"

`StackConfig.build` instantiates and validates every layer: an unknown
protocol or property, or a bad value, raises `PropertyError` naming it, and
each protocol's `check_stack` can refuse combinations that cannot work.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triogroups.properties import PropertyError
from triogroups.protocol import Protocol, protocol_class, protocol_names
from triogroups.transports.base import Transport

if TYPE_CHECKING:
    from triogroups.transports.sim import SimNetwork

__all__ = ["LayerConfig", "StackConfig", "preset_names", "sim_config"]


@dataclass(frozen=True)
class LayerConfig:
    """One layer: a registered protocol name and its property values."""

    name: str
    properties: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Protocol:
        """A fresh, validated protocol object for this layer (PropertyError if a value is bad)."""
        return protocol_class(self.name)(**self.properties)


@dataclass(frozen=True)
class StackConfig:
    """Layers from the transport (first) to the top (last)."""

    layers: tuple[LayerConfig, ...]

    @classmethod
    def of(cls, *layers: str | tuple[str, Mapping[str, Any]]) -> StackConfig:
        """Shorthand for a stack in code: a layer is a name or (name, properties).

        >>> StackConfig.of("SIM", ("DISCARD", {"up_loss": 0.1}), "PASS").names()
        ['SIM', 'DISCARD', 'PASS']
        """
        built = []
        for layer in layers:
            if isinstance(layer, str):
                built.append(LayerConfig(layer))
            else:
                built.append(LayerConfig(layer[0], dict(layer[1])))
        return cls(tuple(built))

    @classmethod
    def preset(cls, name: str) -> StackConfig:
        """A named preset shipped with triogroups (see `preset_names`)."""
        if name not in preset_names():
            known = ", ".join(preset_names()) or "none"
            raise PropertyError(f"unknown stack preset {name!r} (known: {known})")
        text = resources.files("triogroups.presets").joinpath(f"{name}.toml").read_text()
        return cls.from_toml(text, source=f"preset {name}")

    @classmethod
    def from_toml(cls, text: str | Path, *, source: str = "") -> StackConfig:
        """Parse a stack from TOML text, or from a file when given a Path."""
        if isinstance(text, Path):
            source = source or str(text)
            text = text.read_text()
        where = f" in {source}" if source else ""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise PropertyError(f"stack config{where} is not valid TOML: {exc}") from None
        layers = data.get("protocol")
        if not isinstance(layers, list) or not layers:
            raise PropertyError(f"stack config{where} needs [[protocol]] tables, bottom first")
        built = []
        for i, table in enumerate(layers):
            props = dict(table)
            name = props.pop("name", None)
            if not isinstance(name, str):
                raise PropertyError(f"stack config{where}: protocol #{i + 1} has no name")
            _check_case(name, where)
            built.append(LayerConfig(name, props))
        return cls(tuple(built))

    @classmethod
    def resolve(cls, stack: str | Path | StackConfig) -> StackConfig:
        """A preset name, a TOML file path, or a config as is."""
        if isinstance(stack, StackConfig):
            return stack
        if isinstance(stack, Path) or stack.endswith(".toml"):
            return cls.from_toml(Path(stack))
        return cls.preset(stack)

    def names(self) -> list[str]:
        """The layers' protocol names, transport first."""
        return [layer.name for layer in self.layers]

    def _index(self, name: str) -> int:
        for i, layer in enumerate(self.layers):
            if layer.name == name:
                return i
        raise PropertyError(f"stack has no protocol {name!r} (it has: {', '.join(self.names())})")

    def configure(self, name: str, **properties: Any) -> StackConfig:
        """A copy with properties of layer ``name`` changed."""
        i = self._index(name)
        old = self.layers[i]
        layer = LayerConfig(old.name, {**old.properties, **properties})
        return StackConfig((*self.layers[:i], layer, *self.layers[i + 1 :]))

    def insert_above(self, below: str, name: str, **properties: Any) -> StackConfig:
        """A copy with a new layer right above layer ``below``."""
        i = self._index(below) + 1
        return StackConfig((*self.layers[:i], LayerConfig(name, properties), *self.layers[i:]))

    def remove(self, name: str) -> StackConfig:
        """A copy without layer ``name`` (PropertyError if the stack has none)."""
        i = self._index(name)
        return StackConfig((*self.layers[:i], *self.layers[i + 1 :]))

    def replace(self, name: str, new_name: str, **properties: Any) -> StackConfig:
        """A copy with layer ``name`` replaced by ``new_name`` with ``properties`` (the old
        layer's properties are not kept), at the same place.
        """
        i = self._index(name)
        layer = LayerConfig(new_name, properties)
        return StackConfig((*self.layers[:i], layer, *self.layers[i + 1 :]))

    def build(self) -> list[Protocol]:
        """Fresh protocol objects, bottom first, validated as a whole."""
        if not self.layers:
            raise PropertyError("a stack needs at least a transport")
        protocols = [layer.build() for layer in self.layers]
        if not isinstance(protocols[0], Transport):
            raise PropertyError(f"the bottom layer must be a transport, got {self.layers[0].name}")
        for i, proto in enumerate(protocols[1:], start=1):
            if isinstance(proto, Transport):
                raise PropertyError(f"{proto.name} is a transport and must be the bottom layer")
            proto.check_stack(protocols[:i], protocols[i + 1 :])
        return protocols

    def validate(self) -> None:
        """Raise PropertyError if `build` would."""
        self.build()


def _check_case(name: str, where: str) -> None:
    """Refuse a name that differs from a registered protocol only in case (``"udp"``) as
    soon as the file is read, with the name it meant: a later check (a partial stack without
    GMS, say) would otherwise hide the likely typo. Other unknown names wait for `build`: a
    custom protocol registers only once its module is imported."""
    known = protocol_names()
    if name not in known and name.upper() in known:
        try:
            protocol_class(name)
        except PropertyError as exc:
            raise PropertyError(f"stack config{where}: {exc}") from None


def preset_names() -> list[str]:
    """Names of the presets shipped in ``triogroups/presets``."""
    folder = resources.files("triogroups.presets")
    return sorted(
        p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml")
    )


_LOSSLESS_TRANSPORTS = {"TCP"}


def sim_config(config: StackConfig | str | Path, network: SimNetwork) -> StackConfig:
    """``config`` with its transport replaced by a `SimTransport` on ``network``.

    Lives with the configuration, not the test kit, because `open_channel(network=...)`
    uses it too and a member process never imports `triogroups.testing`.

    UDP becomes a lossy endpoint. TCP becomes a lossless one that multicasts as
    TCP does (``fan_out``: one copy to each member of the view, so no IP
    multicast) and takes the first free port of TCP's ``bind_port ..
    bind_port + port_range`` on the network's host; TCPPING's ``initial_hosts``
    keep their ports on that host. Discovery and MERGE3 then take the paths
    they take over TCP: a joiner finds the group by asking those endpoints.
    """
    config = StackConfig.resolve(config)
    bottom = config.layers[0].name
    if bottom == "SIM":
        return config.configure("SIM", network=network.name)
    if bottom not in _LOSSLESS_TRANSPORTS:
        return config.replace(bottom, "SIM", network=network.name, lossless=False)
    tcp = config.layers[0].build()
    config = config.replace(
        bottom,
        "SIM",
        network=network.name,
        lossless=True,
        fan_out=True,
        bind_port=getattr(tcp, "bind_port", 0),
        port_range=getattr(tcp, "port_range", 0),
    )
    if "TCPPING" in config.names():
        ping = config.layers[config.names().index("TCPPING")].build()
        hosts = [f"{network.name}[{port}]" for _, port in getattr(ping, "listed", [])]
        config = config.configure("TCPPING", initial_hosts=hosts)
    return config
