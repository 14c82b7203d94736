"""Cluster profiles: devices, nodes and the two fabrics between them (scale-up and scale-out).

A cluster profile is one YAML file (``clusters/*.yaml`` in the repository, ``napkin/clusters`` in the
wheel) naming a device profile (``hardware/``), how many devices share a node (and its NICs), and:

* ``scale_up`` — the fabric inside one scale-up *domain* (NVLink + NVSwitch, Infinity Fabric, ICI):
  ``bandwidth`` PER DEVICE, PER DIRECTION (NVIDIA's "900 GB/s" for NVLink 4 is both directions added:
  450 GB/s each way), a per-hop ``latency``, the domain's size (8 for a DGX H100, 72 for a GB200 NVL72)
  and, where the switch reduces in the network (NVLink SHARP, "NVLS"), its achieved efficiency;
* ``scale_out`` — the network between domains: NICs per node and each NIC's speed PER DIRECTION.
  Network speeds are quoted in BITS per second: write ``400 Gbit/s`` (= 50 GB/s). ``Gb/s`` and
  ``Gbps`` are refused as ambiguous, because napkin's units are case-insensitive and would read them
  as bytes.

``efficiency`` is the fraction of the line rate NCCL reaches (protocol overhead), cited in each file;
absent, the line rate is used. Lookup order, as for hardware (``napkin.systems.profiles``): the directories in
``$NAPKIN_CLUSTER_PATH``, then ``<config dir>/clusters``, then the built-ins. The first file that answers
to a name (or alias, case- and punctuation-insensitively) wins, as a whole file.

This module is a small loader of its own that reuses the hardware module's YAML reader, error lines,
name rule and config directory; it never prints and imports neither typer nor rich.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from napkin import units
from napkin.domain.base import Record
from napkin.errors import NapkinError, ProfileError, UsageError
from napkin.io.files import bundled, config_dir, env_dirs
from napkin.io.yamlio import normalize, validated
from napkin.io.yamlio import parse as read_yaml
from napkin.systems.profiles import (  # the hardware catalog's types and file helpers, shared
    BrokenProfile,
    BytesPerSecond,
    Origin,
    Slug,
    Source,
    _label,
    _read,
    _yaml_files,
)

ENV_CLUSTER_PATH: Final = "NAPKIN_CLUSTER_PATH"
SCHEMA_FILE: Final = "schema.json"

_STRICT = ConfigDict(extra="forbid", frozen=True, validate_default=True)

_TIME_UNITS: Final = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_LATENCY = re.compile(r"^\s*(?P<num>[0-9.]+(?:[eE][+-]?\d+)?)\s*(?P<unit>[a-zµμ]*)\s*$")
_BITS = re.compile(r"^(?P<prefix>[kmgtp]?)(?:bit/s|bits/s|bit)$", re.IGNORECASE)
_AMBIGUOUS_BITS = re.compile(r"^[kKmMgGtTpP]?b(?:/s|ps)$")
_SI_PREFIX: Final = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_latency(value: object, what: str = "latency") -> float:
    """Seconds from ``3.4 us``, ``14 µs``, ``0.5 ms`` or a bare number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UsageError(f"{what}: expected a time such as '3.4 us' or 3.4e-6 (seconds)")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _LATENCY.match(value)
        unit = match.group("unit") if match else None
        if match is None or unit not in _TIME_UNITS:
            raise UsageError(f"{what}: {value!r} is not a time; write e.g. '3.4 us', '14 µs' or '0.5 ms'")
        seconds = float(match.group("num")) * _TIME_UNITS[unit]
    if not math.isfinite(seconds) or seconds < 0 or seconds > 1.0:
        raise UsageError(f"{what}: {value!r} must be between 0 and 1 s")
    return seconds


def parse_link_bandwidth(value: object, what: str = "bandwidth") -> float:
    """Bytes/s from ``400 Gbit/s`` (bits, ÷ 8) or ``450 GB/s`` (bytes); ``Gb/s``/``Gbps`` are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UsageError(f"{what}: expected a bandwidth such as '400 Gbit/s' or '450 GB/s'")
    if isinstance(value, str):
        match = re.match(r"^\s*([0-9.eE+_-]+)\s*(\S*)\s*$", value)
        unit = match.group(2) if match else ""
        bits = _BITS.match(unit)
        if match and bits:
            number = units.parse_number(match.group(1), what)
            return number * _SI_PREFIX[bits.group("prefix").lower()] / 8.0
        if _AMBIGUOUS_BITS.match(unit):
            raise UsageError(f"{what}: {value!r} is ambiguous; write bits as 'Gbit/s' or bytes as 'GB/s'")
    return units.parse_bandwidth(value, what)


def _annotation(parser: Any, example: str, description: str) -> Any:
    def validate(value: object) -> float:
        try:
            result: float = parser(value, "value")
        except NapkinError as exc:
            raise ValueError(str(exc).removeprefix("value: ")) from None
        return result

    schema = {
        "anyOf": [{"type": "number", "minimum": 0}, {"type": "string"}],
        "description": f"{description}, e.g. {example!r}",
    }
    return [BeforeValidator(validate), WithJsonSchema(schema)]


Latency = Annotated[float, *_annotation(parse_latency, "3.4 us", "seconds, or a time with a unit (s, ms, us, ns)")]
LinkBandwidth = Annotated[
    float,
    *_annotation(parse_link_bandwidth, "400 Gbit/s", "bytes/s, or 'N GB/s' (bytes) or 'N Gbit/s' (bits)"),
]
Efficiency = Annotated[float, Field(gt=0, le=1)]


class InNetworkReduction(Record):
    """The switch reduces (NVLink SHARP): an all-reduce moves S bytes each way per device, not 2(n−1)/n·S."""

    model_config = _STRICT
    efficiency: Efficiency = Field(description="achieved algorithm bandwidth / per-direction line rate")
    latency: Latency = Field(description="fixed cost of one in-switch all-reduce")


class ScaleUp(Record):
    """The fabric inside one scale-up domain. Bandwidth is per device and per direction."""

    model_config = _STRICT
    name: str = Field(min_length=1, description="e.g. 'NVLink 4 + NVSwitch'")
    bandwidth: BytesPerSecond = Field(description="per device, PER DIRECTION (half of NVIDIA's bidirectional figure)")
    latency: Latency = Field(description="per hop (one step of a ring)")
    domain_size: int = Field(ge=1, description="devices that share this fabric (8 in a DGX, 72 in an NVL72)")
    efficiency: Efficiency = Field(default=1.0, description="fraction of the line rate a ring achieves")
    in_network_reduction: InNetworkReduction | None = None


class ScaleOut(Record):
    """The network between domains. NIC speed is per NIC and per direction."""

    model_config = _STRICT
    name: str = Field(min_length=1, description="e.g. 'InfiniBand NDR, ConnectX-7'")
    nics_per_node: int = Field(ge=1)
    nic_bandwidth: LinkBandwidth = Field(description="per NIC, PER DIRECTION; write bits as 'Gbit/s'")
    latency: Latency = Field(description="per hop across the network")
    efficiency: Efficiency = Field(default=1.0, description="fraction of the line rate a ring achieves")


class Cluster(Record):
    """A homogeneous cluster: one device type, nodes of ``devices_per_node``, a scale-up and a scale-out fabric."""

    model_config = _STRICT
    name: Slug = Field(description="identifier used with --cluster")
    display_name: str = Field(min_length=1)
    aliases: list[str] = Field(default_factory=list)
    device: str = Field(min_length=1, description="hardware profile name (napkin hardware list)")
    devices_per_node: int = Field(ge=1, description="devices sharing one node's NICs")
    scale_up: ScaleUp
    scale_out: ScaleOut | None = Field(default=None, description="absent: one scale-up domain is the whole cluster")
    sources: list[Source] = Field(min_length=1)
    notes: str | None = None

    @model_validator(mode="after")
    def _node_fits_domain(self) -> Cluster:
        domain, node = self.scale_up.domain_size, self.devices_per_node
        if domain % node and node % domain:
            raise ValueError(f"scale_up.domain_size ({domain}) and devices_per_node ({node}) must divide one another")
        return self

    def lookup_keys(self) -> set[str]:
        return {normalize(self.name), *(normalize(a) for a in self.aliases)}

    def fabric(self) -> Fabric:
        """The plain numbers the collective model needs (no pydantic in its hot path)."""
        up, out = self.scale_up, self.scale_out
        nvls = up.in_network_reduction
        return Fabric(
            name=self.name,
            domain_size=up.domain_size,
            up_name=up.name,
            up_bandwidth=up.bandwidth * up.efficiency,
            up_latency=up.latency,
            nvls_bandwidth=up.bandwidth * nvls.efficiency if nvls else 0.0,
            nvls_latency=nvls.latency if nvls else 0.0,
            out_name=out.name if out else "",
            out_bandwidth_per_device=out.nics_per_node * out.nic_bandwidth * out.efficiency / self.devices_per_node
            if out
            else 0.0,
            out_latency=out.latency if out else 0.0,
        )


@dataclass(frozen=True, slots=True)
class Fabric:
    """A cluster reduced to floats (bytes/s, seconds) for ``napkin.engines.comm``; bandwidths already × efficiency.

    ``out_bandwidth_per_device`` is one device's share of its node's NICs (8 × 400 Gbit/s shared by 8
    GPUs → 50 GB/s each); 0 when the cluster has no scale-out network. ``nvls_bandwidth`` is 0 without
    in-network reduction.
    """

    name: str
    domain_size: int
    up_name: str
    up_bandwidth: float
    up_latency: float
    nvls_bandwidth: float
    nvls_latency: float
    out_name: str
    out_bandwidth_per_device: float
    out_latency: float


# ------------------------------------------------------------------------------------------ loading


def parse_cluster(text: str, label: str) -> Cluster:
    """Validate one cluster file's YAML; errors name the file, the line and the field."""
    return validated(Cluster, text, label, "cluster")


def builtin_dir() -> Traversable:
    """The bundled clusters: ``napkin/clusters`` in a wheel, the checkout's ``clusters/`` otherwise."""
    return bundled("clusters")


def user_cluster_dir() -> Path:
    return config_dir() / "clusters"


def search_path() -> list[tuple[Origin, Traversable]]:
    """The directories searched for cluster profiles, highest priority first."""
    dirs: list[tuple[Origin, Traversable]] = [("env", d) for d in env_dirs(ENV_CLUSTER_PATH)]
    dirs.append(("user", user_cluster_dir()))
    dirs.append(("built-in", builtin_dir()))
    return dirs


@dataclass(frozen=True)
class LoadedCluster:
    cluster: Cluster
    origin: Origin
    path: str
    text: str = field(default="", repr=False)


@dataclass
class ClusterCatalog:
    clusters: list[LoadedCluster] = field(default_factory=list)
    broken: list[BrokenProfile] = field(default_factory=list)  # the hardware catalog's record of a bad file

    def visible(self) -> list[LoadedCluster]:
        """Clusters not shadowed by an earlier file answering to the same name."""
        seen: set[str] = set()
        result = []
        for loaded in self.clusters:
            if normalize(loaded.cluster.name) in seen:
                continue
            seen |= loaded.cluster.lookup_keys()
            result.append(loaded)
        return result


def built_from(device: str) -> Cluster | None:
    """The first visible cluster whose nodes hold ``device`` (a hardware profile's name), if any."""
    return next((c.cluster for c in load_catalog().visible() if c.cluster.device == device), None)


def _entries(directory: Traversable) -> list[tuple[Traversable, str]]:
    """The YAML files of ``directory`` and their labels, as the hardware catalog lists them."""
    return [(entry, _label(entry)) for entry in _yaml_files(directory)]


def load_catalog() -> ClusterCatalog:
    """Every cluster file along the search path; invalid files are collected, not raised."""
    catalog = ClusterCatalog()
    for origin, directory in search_path():
        for entry, label in _entries(directory):
            try:
                text = _read(entry, label)
                catalog.clusters.append(LoadedCluster(parse_cluster(text, label), origin, label, text))
            except ProfileError as exc:
                catalog.broken.append(BrokenProfile(origin, label, str(exc), tuple(exc.problems)))
    return catalog


def load_file(path: str | Path) -> LoadedCluster:
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        message = f"cluster_file: cannot read {str(file)!r}: {exc.strerror or exc}"
        raise UsageError(message, field="cluster_file") from None
    return LoadedCluster(parse_cluster(text, str(file)), "file", str(file), text)


def find(name: str) -> LoadedCluster:
    """The first cluster along the search path answering to ``name``; an invalid match is an error."""
    key = normalize(name)
    for origin, directory in search_path():
        for entry, label in _entries(directory):
            stem_matches = normalize(entry.name.rsplit(".", 1)[0]) == key
            try:
                text = _read(entry, label)
                data, _ = read_yaml(text, label)
            except ProfileError:
                if stem_matches:
                    raise
                continue
            raw = data if isinstance(data, dict) else {}
            aliases = raw.get("aliases") if isinstance(raw.get("aliases"), list) else []
            names = {normalize(str(n)) for n in [raw.get("name"), *(aliases or [])] if n is not None}
            if key in names or (stem_matches and not raw.get("name")):
                return LoadedCluster(parse_cluster(text, label), origin, label, text)
    known = ", ".join(sorted(c.cluster.name for c in load_catalog().visible()))
    # No ``field``: the CLI would rewrite the word "cluster" in 'napkin cluster new' (as napkin.systems.profiles does).
    raise UsageError(
        f"--cluster: unknown cluster {name!r}; known: {known}. "
        "Add your own with 'napkin cluster new NAME --from dgx-h100'"
    )


def resolve(name: str | None = None, cluster_file: str | Path | None = None) -> LoadedCluster:
    """The cluster a command should use: an explicit file, else a name (required)."""
    if name is not None and cluster_file is not None:
        raise UsageError("give cluster or cluster_file, not both", field="cluster", also=("cluster_file",))
    if cluster_file is not None:
        return load_file(cluster_file)
    if name is None:
        raise UsageError("--cluster is required (see 'napkin cluster list')")
    return find(name)


def copy_text(source: LoadedCluster, name: str, today: str) -> str:
    """``source``'s YAML renamed to ``name`` (aliases dropped when renamed); comments and layout kept."""
    header = (
        f"# Copied from the {source.origin} cluster '{source.cluster.name}' by 'napkin cluster new' "
        f"on {today}. Edit freely; 'napkin cluster validate' checks it.\n"
    )
    text = re.sub(r"^name:.*$", f"name: {name}", source.text, count=1, flags=re.MULTILINE)
    if name != source.cluster.name:
        text = re.sub(r"^aliases:.*$", "aliases: []", text, count=1, flags=re.MULTILINE)
    lines = text.splitlines(keepends=True)
    if lines and lines[0].startswith("# yaml-language-server"):
        return lines[0] + header + "".join(lines[1:])
    return f"# yaml-language-server: $schema={SCHEMA_FILE}\n" + header + text


def schema() -> dict[str, Any]:
    """The JSON Schema of a cluster file (for editors: yaml-language-server)."""
    result = Cluster.model_json_schema()
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["title"] = "napkin cluster profile"
    return result
