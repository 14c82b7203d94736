"""Checked by ``mypy --strict`` (``.ci/run``), not run by pytest: every question of the library returns its concrete
result type, so a misspelt result field in user code is a type error.

``assert_type`` fails the type check if a question's return type changes; each ``# type: ignore[attr-defined]``
below marks a misspelling mypy must report: were the result typed ``Any`` again, the ignore would be unused,
and ``warn_unused_ignores`` (part of ``--strict``) fails the check. ``tests/test_api.py`` checks at run time that
every question declares a result class.
"""

from __future__ import annotations

from typing import assert_type

import napkin
from napkin.engines.comm import CollectiveResult
from napkin.engines.compute import MatmulResult, MfuResult, TrainFlopsResult, TrainTimeResult
from napkin.engines.finetune import FinetuneMemoryResult
from napkin.engines.finetune_max import FinetuneMaxResult
from napkin.engines.memory import MaxModelResult, MemoryResult, OptimizerTable
from napkin.engines.number_formats import DtypeTable, TensorSize
from napkin.engines.planner import PlanResult
from napkin.engines.scaling import OptimalResult
from napkin.engines.serving import InferenceResult, KvCacheResult
from napkin.engines.step import StepResult
from napkin.results.cluster_views import ClusterList, ClusterSheet
from napkin.results.hardware_views import HardwareComparison, HardwareList, HardwareSheet
from napkin.results.model_views import ModelTable
from napkin.systems.profiles import HardwareProfile


def questions() -> None:
    run = napkin.train_time(params="70B", tokens="15T", gpus=1024)
    assert_type(run, TrainTimeResult)
    print(run.days, run.dayz)  # type: ignore[attr-defined]
    assert_type(napkin.mfu(params="7B", gpus=8, days=1, tokens="1T"), MfuResult)
    assert_type(napkin.flops(params="7B", tokens="1T"), TrainFlopsResult)
    assert_type(napkin.matmul(4096, 4096, 4096), MatmulResult)
    assert_type(napkin.optimal(compute=1e24), OptimalResult)
    mem = napkin.memory(params="7B", gpus=8)
    assert_type(mem, MemoryResult | FinetuneMemoryResult)  # finetune="lora"/"qlora" gives the adapters' result
    print(mem.per_gpu_bytes, mem.per_gpu_byte)  # type: ignore[union-attr]
    assert_type(napkin.max_model(gpus=8), MaxModelResult | FinetuneMaxResult)
    step = napkin.step(model="llama3-8b", gpus=8, global_batch=16)
    assert_type(step, StepResult)
    print(step.mfu, step.mfu_predicted)  # type: ignore[attr-defined]
    assert_type(napkin.plan(model="llama3-8b", gpus=8, global_batch=16), PlanResult)
    assert_type(napkin.inference(model="llama3-8b"), InferenceResult)
    assert_type(napkin.kv_cache(model="llama3-8b"), KvCacheResult)
    assert_type(napkin.collective("all-reduce", bytes="1GB"), CollectiveResult)
    assert_type(napkin.tensor("8x8"), TensorSize)
    assert_type(napkin.dtypes(), DtypeTable)
    assert_type(napkin.optimizers(), OptimizerTable)
    assert_type(napkin.models(), ModelTable)
    assert_type(napkin.hardware("h100"), HardwareProfile)
    assert_type(napkin.hardware_list(), HardwareList)
    assert_type(napkin.hardware_sheet("h100"), HardwareSheet)
    assert_type(napkin.hardware_compare(["h100", "a100"]), HardwareComparison)
    assert_type(napkin.cluster_list(), ClusterList)
    assert_type(napkin.cluster_sheet("dgx-h100"), ClusterSheet)
