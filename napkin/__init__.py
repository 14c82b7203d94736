"""napkin: napkin math for deep-learning training runs.

The library is the product; the ``napkin`` command is a thin layer over it. Every quantity is
computed in base units (FLOP, bytes, seconds, watts) and converted only when shown.

    import napkin
    napkin.train_time(params="70B", tokens="15T", gpus=1024).days      # 143.9…
    napkin.memory(model="llama3-8b", gpus=8, precision="mixed", tensor_parallel=2, recompute="full").fits

The question functions live in ``napkin.api`` and the domain objects in their own modules; both are
imported on first use, so ``import napkin`` stays cheap.
"""

from __future__ import annotations

from napkin._startup import guard_the_command

guard_the_command()  # Ctrl-C while the command loads: one line, exit 130 (a library user's program: untouched)

from typing import TYPE_CHECKING  # noqa: E402

from napkin.errors import NapkinError, ProfileError, UsageError  # noqa: E402
from napkin.lazy import lazy_attributes  # noqa: E402

__version__ = "0.1.0"

if TYPE_CHECKING:
    from napkin.api import (
        cluster_list,
        cluster_sheet,
        collective,
        dtypes,
        flops,
        hardware_compare,
        hardware_list,
        hardware_sheet,
        inference,
        kv_cache,
        matmul,
        max_model,
        memory,
        mfu,
        models,
        optimal,
        optimizers,
        plan,
        serve_plan,
        step,
        tensor,
        traffic,
        train_time,
    )
    from napkin.api import get_hardware as hardware
    from napkin.domain.layout import Layout
    from napkin.domain.model import Model
    from napkin.domain.workload import Workload

_LAZY = {
    "train_time": "napkin.api",
    "mfu": "napkin.api",
    "flops": "napkin.api",
    "matmul": "napkin.api",
    "memory": "napkin.api",
    "max_model": "napkin.api",
    "optimal": "napkin.api",
    "tensor": "napkin.api",
    "dtypes": "napkin.api",
    "optimizers": "napkin.api",
    "models": "napkin.api",
    "inference": "napkin.api",
    "kv_cache": "napkin.api",
    "traffic": "napkin.api",
    "serve_plan": "napkin.api",
    "hardware": "napkin.api:get_hardware",
    "Model": "napkin.domain.model",
    "Layout": "napkin.domain.layout",
    "Workload": "napkin.domain.workload",
    "collective": "napkin.api",
    "step": "napkin.api",
    "plan": "napkin.api",
    "hardware_list": "napkin.api",
    "hardware_compare": "napkin.api",
    "cluster_list": "napkin.api",
    "cluster_sheet": "napkin.api",
    "hardware_sheet": "napkin.api",
}


__getattr__ = lazy_attributes("napkin", _LAZY)


__all__ = [
    "Layout",
    "Model",
    "NapkinError",
    "ProfileError",
    "UsageError",
    "Workload",
    "__version__",
    "cluster_list",
    "cluster_sheet",
    "collective",
    "dtypes",
    "flops",
    "hardware",
    "hardware_compare",
    "hardware_list",
    "hardware_sheet",
    "inference",
    "kv_cache",
    "matmul",
    "max_model",
    "memory",
    "mfu",
    "models",
    "optimal",
    "optimizers",
    "plan",
    "serve_plan",
    "step",
    "tensor",
    "traffic",
    "train_time",
]


def __dir__() -> list[str]:
    """The API, lazy names included, so ``dir(napkin)`` and a notebook's completion list every question."""
    return sorted(__all__)
