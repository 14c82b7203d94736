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
absent, the line rate is used. Lookup order and rules are the hardware catalog's (``napkin.systems.profiles.find_in``):
the directories in ``$NAPKIN_CLUSTER_PATH``, then ``<config dir>/clusters``, then the built-ins; a name or
alias (case- and punctuation-insensitive) claimed by two files is an error naming both; your file replaces
a built-in only under the built-in's own name, and every command that uses it says so. Files are read by
``napkin.io.files.read_text`` (regular files of bounded size only), whether found on the path or given by path.

This module reuses the hardware module's catalog, YAML reader, error lines, name rule and config
directory; it never prints and imports neither typer nor rich.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from napkin import units
from napkin.domain.base import Record
from napkin.errors import NapkinError, UsageError
from napkin.io.yamlio import normalize, validated
from napkin.systems import profiles
from napkin.systems.profiles import (  # the hardware catalog's types and lookup, shared
    BrokenProfile,
    BytesPerSecond,
    Kind,
    Loaded,
    Origin,
    Slug,
    Source,
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


class Cluster(profiles.Profile):
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
    #: every pair of devices in a scale-up domain has a direct link (an NVLink switch, a full mesh); False for a
    #: device's own interconnect figure (PCIe through the host), where engines' peer-to-peer all-reduce stops at 2
    direct_links: bool = True

    def links(self, group: int) -> str:
        """The links a group of ``group`` devices, packed into whole domains, crosses."""
        if group <= self.domain_size:
            return self.up_name
        return f"{self.up_name} and {self.out_name} across {group // self.domain_size} domains of {self.domain_size}"


# ------------------------------------------------------------------------------------------ loading


def parse_cluster(text: str, label: str) -> Cluster:
    """Validate one cluster file's YAML; errors name the file, the line and the field."""
    return validated(Cluster, text, label, "cluster")


#: Clusters are a kind of profile of the one catalog (``profiles.Kind``): the same lookup order, shadowing rules,
#: safe reader and notes as hardware and stacks.
CLUSTERS: Final[Kind[Cluster]] = Kind("clusters", ENV_CLUSTER_PATH, "cluster", "cluster", "dgx-h100", parse_cluster)


def builtin_dir() -> Traversable:
    """The bundled clusters: ``napkin/clusters`` in a wheel, the checkout's ``clusters/`` otherwise."""
    return CLUSTERS.builtin_dir()


def user_cluster_dir() -> Path:
    return CLUSTERS.user_dir()


def search_path() -> list[tuple[Origin, Traversable]]:
    """The directories searched for cluster profiles, highest priority first."""
    return CLUSTERS.search_path()


@dataclass(frozen=True)
class LoadedCluster:
    cluster: Cluster
    origin: Origin
    path: str
    text: str = field(default="", repr=False)

    @classmethod
    def of(cls, loaded: Loaded[Cluster]) -> LoadedCluster:
        return cls(loaded.profile, loaded.origin, loaded.path, loaded.text)

    def as_loaded(self) -> Loaded[Cluster]:
        return Loaded(self.cluster, self.origin, self.path, self.text)


@dataclass
class ClusterCatalog:
    clusters: list[LoadedCluster] = field(default_factory=list)
    broken: list[BrokenProfile] = field(default_factory=list)  # the hardware catalog's record of a bad file
    #: Built-in clusters replaced by a user cluster of the same name.
    replaced: list[LoadedCluster] = field(default_factory=list)
    #: Names claimed by two files (each an error when that name is looked up).
    conflicts: list[str] = field(default_factory=list)

    def visible(self) -> list[LoadedCluster]:
        """The clusters a name can reach (replaced built-ins excluded)."""
        return list(self.clusters)


def built_from(device: str) -> Cluster | None:
    """The built-in cluster made of ``device`` (a hardware profile's name), if any, as its name resolves (your
    file of the same name replaces it, and says so). A user cluster of another name is never a default."""
    made = _builtin_by_device().get(device)
    return find(made).cluster if made is not None else None


@functools.cache
def _builtin_by_device() -> dict[str, str]:
    """device → the first built-in cluster made of it. The shipped files cannot change under a running process,
    so they are validated once; user files are still looked up afresh by ``find``."""
    builtins = profiles.catalog_of(CLUSTERS, [("built-in", CLUSTERS.builtin_dir())])
    made: dict[str, str] = {}
    for loaded in builtins.visible():
        made.setdefault(loaded.profile.device, loaded.profile.name)
    return made


def load_catalog() -> ClusterCatalog:
    """Every cluster file along the search path; invalid files and names claimed twice are collected, not raised."""
    found = profiles.catalog_of(CLUSTERS)
    return ClusterCatalog(
        clusters=[LoadedCluster.of(c) for c in found.profiles],
        broken=found.broken,
        replaced=[LoadedCluster.of(c) for c in found.replaced],
        conflicts=found.conflicts,
    )


def load_file(path: str | Path) -> LoadedCluster:
    """One explicit cluster file (``--cluster-file``): a regular file of bounded size; anything wrong with it is
    bad input naming ``cluster_file`` (``profiles.file_of``)."""
    return LoadedCluster.of(profiles.file_of(CLUSTERS, path, "cluster_file"))


def find(name: str, what: str = "cluster") -> LoadedCluster:
    """The cluster that answers to ``name``, by the catalog's rules (``profiles.find_in``); a replaced built-in is
    said with the result. ``what`` names the input the name came from in error messages (``cluster``, a command's
    ``name`` argument, ``source`` for ``--from``)."""
    return LoadedCluster.of(profiles.find_in(CLUSTERS, name, what=what))


def is_builtin_name(name: str) -> str | None:
    """The built-in cluster that answers to ``name`` (by name or alias), if any."""
    return profiles.is_builtin_name(name, CLUSTERS)


def resolve(name: str | None = None, cluster_file: str | Path | None = None) -> LoadedCluster:
    """The cluster a command should use: an explicit file, else a name (required)."""
    if name is not None and cluster_file is not None:
        raise UsageError("give cluster or cluster_file, not both", field="cluster", also=("cluster_file",))
    if cluster_file is not None:
        return load_file(cluster_file)
    if name is None:
        raise UsageError("cluster is required (see 'napkin cluster list')", field="cluster")
    return find(name)


def copy_text(source: LoadedCluster, name: str, today: str) -> str:
    """``source``'s YAML renamed to ``name`` (aliases dropped when renamed), edited structurally as every profile
    is (``profiles.copy_text``): comments and layout kept, any YAML style of name and aliases."""
    return profiles.copy_text(source.as_loaded(), name, today, CLUSTERS)


def schema() -> dict[str, Any]:
    """The JSON Schema of a cluster file (for editors: yaml-language-server)."""
    result = Cluster.model_json_schema()
    result["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    result["title"] = "napkin cluster profile"
    return result
