"""The notebook API: one function per question, taking what the command line takes.

    import napkin
    run = napkin.train_time(params="70B", tokens="15T", gpus=1024, hardware="h100", mfu=(0.35, 0.5))
    run.days          # 143.9…
    run               # a table in a notebook, one line in a REPL; run.explain() for the derivation

Every keyword of a command is a keyword here, under the same name (``--tensor-parallel`` is
``tensor_parallel``); strings with units are accepted wherever the command accepts them, numbers too;
hardware by name or as a profile object, a model by preset name or as a ``Model``. Unknown keywords
raise ``TypeError``. Errors are ``UsageError`` naming the keyword (``field``). The CLI calls these very
functions, so the two cannot drift apart.
"""

from typing import TYPE_CHECKING

from napkin.lazy import lazy_attributes

if TYPE_CHECKING:
    from napkin.api.calibration import calibrate
    from napkin.api.catalog import (
        cluster_list,
        cluster_sheet,
        dtypes,
        hardware_compare,
        hardware_list,
        hardware_sheet,
        models,
        optimizers,
        stack_list,
        stack_sheet,
        tensor,
    )
    from napkin.api.comm import collective
    from napkin.api.inputs import SHAPE_FIELDS, build_layout
    from napkin.api.model_inputs import build_model
    from napkin.api.planning import plan, step, step_setup
    from napkin.api.serving import inference, kv_cache, serve_plan, traffic
    from napkin.api.sizing import max_model, memory
    from napkin.api.system_inputs import get_cluster, get_hardware, get_stack
    from napkin.api.training import flops, matmul, mfu, optimal
    from napkin.api.training_time import train_time

#: Each function's module, imported on first use: a command pays for its own question's module only (``plan``
#: never builds the serving questions' models); ``calibrate`` reads and writes files and builds the stack catalog.
_MODULES = {
    **dict.fromkeys(
        (
            "cluster_list",
            "cluster_sheet",
            "dtypes",
            "hardware_compare",
            "hardware_list",
            "hardware_sheet",
            "models",
            "optimizers",
            "stack_list",
            "stack_sheet",
            "tensor",
        ),
        "catalog",
    ),
    "calibrate": "calibration",
    "collective": "comm",
    **dict.fromkeys(("SHAPE_FIELDS", "build_layout"), "inputs"),
    "build_model": "model_inputs",
    **dict.fromkeys(("get_cluster", "get_hardware", "get_stack"), "system_inputs"),
    **dict.fromkeys(("plan", "step", "step_setup"), "planning"),
    **dict.fromkeys(("inference", "kv_cache", "serve_plan", "traffic"), "serving"),
    **dict.fromkeys(("max_model", "memory"), "sizing"),
    **dict.fromkeys(("flops", "matmul", "mfu", "optimal"), "training"),
    "train_time": "training_time",
}


__getattr__ = lazy_attributes("napkin.api", {name: f".{module}" for name, module in _MODULES.items()})


__all__ = [
    "SHAPE_FIELDS",
    "build_layout",
    "build_model",
    "calibrate",
    "cluster_list",
    "cluster_sheet",
    "collective",
    "dtypes",
    "flops",
    "get_cluster",
    "get_hardware",
    "get_stack",
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
    "stack_list",
    "stack_sheet",
    "step",
    "step_setup",
    "tensor",
    "traffic",
    "train_time",
]
