"""Questions about the catalogs: hardware, clusters, dtypes, optimizers, model presets, tensors."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from napkin import units
from napkin.api.inputs import choice, parse, said
from napkin.domain.choices import Dtype
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.engines.memory import OptimizerTable
    from napkin.engines.number_formats import DtypeTable, TensorSize
    from napkin.results.cluster_views import ClusterList, ClusterSheet
    from napkin.results.hardware_views import HardwareComparison, HardwareList, HardwareSheet
    from napkin.results.model_views import ModelTable
    from napkin.results.stack_views import StackList, StackSheet

from napkin.api.inputs import Number


def hardware_list() -> HardwareList:
    """Every hardware profile napkin can see (built-in, yours, ``$NAPKIN_HARDWARE_PATH``) and any invalid file."""
    from napkin.results.hardware_views import HardwareList
    from napkin.systems.profiles import load_catalog

    return HardwareList.of(load_catalog())


def hardware_sheet(name: str | None = None, hardware_file: str | Path | None = None) -> HardwareSheet:
    """One profile with every field, unit and source (``napkin hardware show``)."""
    from napkin.results.hardware_views import HardwareSheet
    from napkin.systems.profiles import resolve

    if name is None and hardware_file is None:
        raise UsageError("give a profile name or hardware_file", field="name", also=("hardware_file",))
    loaded = resolve(name, hardware_file) if hardware_file is not None else resolve(name, what="name")
    return said(HardwareSheet(loaded=loaded), loaded.profile)


def hardware_compare(names: list[str], *, dtype: str | Dtype = Dtype.bf16) -> HardwareComparison:
    """Profiles side by side with the ridge point at ``dtype`` (``napkin hardware compare``)."""
    from napkin.results.hardware_views import HardwareComparison
    from napkin.systems.profiles import resolve

    if len(names) < 2:
        raise UsageError("NAMES: give two or more profiles to compare (for one, use 'napkin hardware show')")
    profiles = [resolve(n, what="names").profile for n in names]
    return said(HardwareComparison(profiles=profiles, dtype=choice(Dtype, dtype, "dtype")), *profiles)


def stack_list() -> StackList:
    """Every stack profile napkin can see (built-in, yours, ``$NAPKIN_STACK_PATH``) and any invalid file."""
    from napkin.results.stack_views import StackList
    from napkin.systems.profiles import catalog_of
    from napkin.systems.stack import STACKS

    return StackList.of(catalog_of(STACKS))


def stack_sheet(name: str | None = None, stack_file: str | Path | None = None) -> StackSheet:
    """One stack with every value and its source (``napkin stack show``)."""
    from napkin.results.stack_views import StackSheet
    from napkin.systems.stack import resolve

    if name is None and stack_file is None:
        raise UsageError("give a stack name or stack_file", field="name", also=("stack_file",))
    loaded = resolve(name, stack_file, what="name")
    return said(StackSheet(loaded=loaded), loaded.profile)


def cluster_list() -> ClusterList:
    """Every cluster profile napkin can see (built-in, yours, ``$NAPKIN_CLUSTER_PATH``)."""
    from napkin.results.cluster_views import ClusterList
    from napkin.systems.cluster import load_catalog

    return ClusterList.of(load_catalog())


def cluster_sheet(name: str) -> ClusterSheet:
    """One cluster profile with every field, unit and source (``napkin cluster show``)."""
    from napkin.results.cluster_views import ClusterSheet
    from napkin.systems.cluster import find

    loaded = find(name, what="name")  # the command's argument, as hardware_sheet and stack_sheet name theirs
    return said(ClusterSheet(loaded=loaded), loaded.cluster)


def tensor(shape: str | tuple[int, ...], *, dtype: str = "bf16") -> TensorSize:
    """Bytes of a dense tensor (``"49152x12288"`` or a tuple), in GB and GiB."""
    from napkin.engines.number_formats import parse_shape, tensor_size

    if isinstance(shape, str):
        dims = parse_shape(shape)
    elif isinstance(shape, tuple | list) and shape:
        dims = tuple(parse(units.parse_length, d, "shape") for d in shape)  # each a positive size, as on the CLI
    else:
        raise UsageError(
            f"shape: {shape!r} is not a shape; give a tuple of positive sizes or text such as '49152x12288'",
            field="shape",
        )
    return tensor_size(dims, str(dtype).lower())


def dtypes(*, value: Number | None = None) -> DtypeTable:
    """Every number format's range and precision; with ``value``, what each stores for it."""
    from napkin.engines.number_formats import dtypes as engine

    return engine(value)


def optimizers() -> OptimizerTable:
    """Bytes per parameter for every optimizer × precision regime."""
    from napkin.engines.memory import optimizers as engine

    return engine()


def models() -> ModelTable:
    """The model presets usable as ``model=``."""
    from napkin.results.model_views import models as engine

    return engine()


# --------------------------------------------------------------------------------------- inference
