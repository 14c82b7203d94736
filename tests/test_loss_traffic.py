"""The loss's HBM traffic over the logits: a stack's own bytes per logit (``elementwise.loss_bytes_per_logit``),
counted from the code its recipes run, else napkin's four fp32 passes."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from napkin.systems.stack import LOSS_BYTES_PER_LOGIT
from napkin.systems.stack import resolve as stack
from tests.conftest import Run
from tests.training_runs import cases

ROOT = Path(__file__).resolve().parent.parent
MEGATRON = ("megatron-core", "megatron-core-moe", "megatron-core-moe-a2a-overlap")
ARGS = ("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "16")


def _loss_step(napkin: Run, *stack_args: str) -> dict[str, str]:
    steps = json.loads(napkin(*ARGS, *stack_args, "--json", "--explain").stdout)["steps"]
    (found,) = [s for s in steps if s["quantity"].startswith("output layer and loss")]
    return {str(key): str(value) for key, value in found.items()}


def test_megatron_core_runs_transformer_engine_s_cross_entropy_and_explain_cites_its_kernels(napkin: Run) -> None:
    """Transformer Engine's Triton loss (v2.5 triton/cross_entropy.py): the online softmax reads each bf16 logit
    (2 B), the loss kernel reads it and writes its gradient over it (2 + 2 B), the backward scales it (2 + 2 B)."""
    for name in MEGATRON:
        assert stack(name).profile.knobs("h100-sxm").loss_bytes == 2 + (2 + 2) + (2 + 2)
    found = _loss_step(napkin, "--stack", "megatron-core")
    assert "10 B per logit" in found["substituted"]
    assert "transformer_engine/pytorch/triton/cross_entropy.py" in found["source"]
    assert 'cross_entropy_fusion_impl = "te"' in found["source"]


def test_a_stack_that_states_no_loss_keeps_napkin_s_four_fp32_passes(napkin: Run) -> None:
    assert stack("torchtitan").profile.knobs("h100-sxm").loss_bytes == LOSS_BYTES_PER_LOGIT
    found = _loss_step(napkin, "--stack", "torchtitan")
    assert found["source"].startswith("napkin:")  # not the elementwise section's citation, which says nothing of it


def test_each_byte_per_logit_costs_at_least_its_time_at_the_hbm_peak() -> None:
    """Nemotron-8B at TP 2 (256k vocabulary, 4 × 4,096 tokens a micro-batch): 52 B per logit (Megatron-Core 0.8
    unfused) against Transformer Engine's 10 B is at least 42 B × 2.1e9 logits at the H100's 3.35 TB/s, and the
    step is slower by it on every micro-batch of the last stage; no other term moves."""
    (case,) = [c for c in cases() if c.id == "nemo-2407-nemotron-8b-g64"]
    sm, k = case.model, case.knobs
    logits = k.micro_batch * sm.seq * sm.model.vocab / k.tensor_parallel
    assert logits == 4 * 4096 * 256_000 / 2
    te, eager = (sm.with_stack(sm.stack.replace(loss_bytes=b)) for b in (10.0, 52.0))
    extra = eager.layer_passes(k).logits - te.layer_passes(k).logits
    assert extra >= 42 * logits / sm.hw.hbm
    assert extra <= 42 * logits / (0.5 * sm.hw.hbm)  # a large kernel streams at well over half the peak
    p_te, p_eager = te.layer_passes(k), eager.layer_passes(k)
    assert (p_te.forward, p_te.recompute, p_te.tensor_parallel) == (
        p_eager.forward,
        p_eager.recompute,
        p_eager.tensor_parallel,
    )
    micro_batches = sm.batch // (k.micro_batch * k.data_parallel)
    slower = eager.evaluate(k).step_seconds - te.evaluate(k).step_seconds
    assert slower >= micro_batches * extra * 0.999


def test_a_loss_byte_count_out_of_range_is_refused_naming_the_field(napkin: Run, tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "stacks" / "megatron-core.yaml").read_text(encoding="utf-8"))
    data["name"] = "lossless"
    data["training"]["elementwise"]["loss_bytes_per_logit"] = 1
    bad = tmp_path / "lossless.yaml"
    bad.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    r = napkin("stack", "validate", str(bad))
    assert r.exit_code == 1 and "loss_bytes_per_logit" in r.stderr
    r = napkin(*ARGS, "--stack-file", str(bad))
    assert r.exit_code == 2 and "loss_bytes_per_logit" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
