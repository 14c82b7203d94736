"""The systems a question runs on: hardware, cluster and stack profiles by name, file or object, the links a TP
group uses, and the memory a fit may use (capacity less --reserve)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin import units
from napkin.api.inputs import Number, textual
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used (start-up time)
    from napkin.systems.cluster import Cluster, Fabric
    from napkin.systems.profiles import HardwareProfile


def get_stack(name: str | Any | None = None, stack_file: str | Path | None = None) -> Any:
    """A stack profile by name or alias (``"torchtitan"``), from a YAML file, or the default (``$NAPKIN_STACK``,
    else megatron-core)."""
    from napkin.systems.stack import Stack, resolve

    if isinstance(name, Stack):
        return name
    if name is not None and stack_file is not None:
        raise UsageError("give stack or stack_file, not both", field="stack", also=("stack_file",))
    if name is not None and not str(name).strip():
        raise UsageError("stack: an empty name; give a stack such as megatron-core", field="stack")
    return resolve(None if name is None else str(name), stack_file, side="training").profile


def get_hardware(name: str | HardwareProfile | None = None, hardware_file: str | Path | None = None) -> HardwareProfile:
    """A hardware profile by name or alias (``"h100"``), from a YAML file, or the default one."""
    from napkin.systems.profiles import HardwareProfile

    if isinstance(name, HardwareProfile):
        return name
    if name is not None:
        textual(name, "hardware", "a profile name (such as 'h100') or a HardwareProfile")
    if hardware_file is not None:
        textual(hardware_file, "hardware_file", "a path to a profile YAML file", path=True)
    return _resolve_hardware(name, hardware_file)


def _resolve_hardware(name: str | None, hardware_file: str | Path | None) -> HardwareProfile:
    from napkin.systems.profiles import resolve

    if name is not None and hardware_file is not None:
        raise UsageError("give hardware or hardware_file, not both", field="hardware", also=("hardware_file",))
    if name is not None and not str(name).strip():
        raise UsageError("hardware: an empty name; give a profile name such as h100", field="hardware")
    return resolve(name, hardware_file).profile


def fabric_of(profile: HardwareProfile, tensor: int) -> Fabric | None:
    """The links of the built-in cluster made of ``profile``'s device, for TP communication (None when there is no
    such cluster, or for one device). A TP group larger than one scale-up domain spans whole domains and crosses
    the scale-out network, which the collective model charges (``tp_span_problem`` says which groups cannot)."""
    if tensor == 1:
        return None
    from napkin.systems.cluster import built_from

    cluster = built_from(profile.name)
    return cluster.fabric() if cluster is not None else None


def tp_span_problem(profile: HardwareProfile, tensor: int) -> str | None:
    """Why napkin cannot time a TP group of ``tensor`` of ``profile``'s devices (None when it can), without the
    input's name: with a built-in cluster, a group beyond one scale-up domain must span whole domains and have a
    scale-out network to cross; without one, it must stay within the devices the device's own interconnect joins
    (``interconnect_devices``), as nothing times the links past them."""
    if tensor == 1:
        return None
    from napkin.systems.cluster import built_from

    cluster = built_from(profile.name)
    if cluster is None:
        joined = profile.interconnect_devices
        if joined is None or tensor <= joined or profile.interconnect_bandwidth is None:
            return None
        return (
            f"TP {tensor} spans more than the {joined} {profile.name} devices its "
            f"{profile.interconnect or 'interconnect'} joins, and no cluster profile is built from it to time the "
            f"links beyond; give TP of at most {joined}"
        )
    fabric = cluster.fabric()
    domain, scale_out = fabric.domain_size, fabric.out_bandwidth_per_device > 0
    if tensor <= domain or (scale_out and tensor % domain == 0):
        return None
    across = (
        f"a multiple of {domain} to span whole domains"
        if scale_out
        else f"at most {domain} ({cluster.name} has no scale-out network)"
    )
    return (
        f"TP {tensor} spans more than one scale-up domain of {cluster.name} ({domain} devices on {fabric.up_name}); "
        f"give TP of {across}"
    )


def get_cluster(
    cluster: str | Cluster | None = None,
    hardware: str | HardwareProfile | None = None,
    hardware_file: str | Path | None = None,
    *,
    gpus: int | None = None,
) -> tuple[Cluster, HardwareProfile]:
    """(cluster, its device's profile): by cluster name, or the built-in cluster built from ``hardware``; one
    ``gpus`` of a device no cluster is built from is a cluster of one device (no fabric: nothing to communicate).
    A ``Cluster`` and the ``HardwareProfile`` of its device, both objects, are taken as they are (a custom device on
    a custom cluster, no file needed)."""
    from napkin.systems.cluster import Cluster, ScaleUp, built_from, find
    from napkin.systems.profiles import HardwareProfile

    if isinstance(cluster, Cluster) and isinstance(hardware, HardwareProfile) and hardware_file is None:
        # a library user's own device on their own cluster: the pair, once the cluster names that device
        if cluster.device != hardware.name:
            raise UsageError(
                f"cluster: {cluster.name} is built from {cluster.device!r}, not the hardware given ({hardware.name!r})",
                field="cluster",
                also=("hardware",),
            )
        return cluster, hardware
    if cluster is not None and (hardware is not None or hardware_file is not None):
        # both given: they must agree, since a cluster names its device (the device given is the one used)
        named, _ = get_cluster(cluster)
        profile = get_hardware(hardware, hardware_file)
        if profile.name != named.device:
            raise UsageError(
                f"cluster: {named.name} is built from {named.device!r}, not the hardware given ({profile.name!r}); "
                "give one of them (a cluster names its device)",
                field="cluster",
                also=("hardware", "hardware_file"),
            )
        return named, profile
    if isinstance(cluster, Cluster):
        return cluster, _device_of(cluster, "the cluster given")
    if cluster is not None:
        textual(cluster, "cluster", "a cluster name (such as 'dgx-h100') or a Cluster")
        if not str(cluster).strip():
            raise UsageError("cluster: an empty name; give a cluster such as dgx-h100", field="cluster")
        loaded = find(str(cluster))
        return loaded.cluster, _device_of(loaded.cluster, loaded.path)
    profile = get_hardware(hardware, hardware_file)
    built = built_from(profile.name)
    if built is None and gpus == 1:
        single = Cluster(
            name="single-" + re.sub(r"[^a-z0-9-]+", "-", profile.name.lower()).strip("-"),
            display_name=f"one {profile.name} (no fabric)",
            device=profile.name,
            devices_per_node=1,
            scale_up=ScaleUp(name="none (one device)", bandwidth=1.0, latency=0.0, domain_size=1),
            sources=[{"title": "one device: no collective communication", "url": "doc:single-device"}],
        )
        return single, profile
    if built is None:
        # no field: the message names the command 'napkin cluster list', which a flag rewrite would garble
        raise UsageError(f"no cluster profile is built from {profile.name}; name a cluster (see 'napkin cluster list')")
    return built, profile


def _device_of(cluster: Any, where: str) -> HardwareProfile:
    """The hardware profile a cluster's ``device`` names; an unknown one is blamed on the cluster file, not on
    a --hardware the user never gave."""
    from napkin.systems.profiles import resolve

    return resolve(cluster.device, what=f"{where}: device").profile


def usable_capacity(profile: HardwareProfile) -> float:
    from napkin.engines.memory import capacity

    return capacity(profile)[0]


def reserve_of(reserve: Number, capacity: float) -> float:
    from napkin.engines.memory import parse_reserve

    try:
        held = parse_reserve(str(reserve), capacity)
    except UsageError as exc:
        raise UsageError(str(exc), field="reserve") from None
    if capacity > 0 and held >= capacity:
        raise UsageError(
            f"reserve: {reserve!r} is {units.format_bytes(held)}, not less than the device's "
            f"{units.format_bytes(capacity)}; give bytes (4GB) or a fraction of it (10%)",
            field="reserve",
        )
    return held
