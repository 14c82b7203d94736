"""Memory accounting against the ZeRO and Korthikanti papers, and its invariants."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin.domain.choices import Optimizer, Precision, Recompute, Sharding
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.memory import (
    OPTIMIZERS,
    PRECISIONS,
    ActivationInputs,
    activation_bytes_per_layer,
    bytes_per_param,
    max_model,
    memory,
    parse_reserve,
    state_elements,
)
from tests.conftest import builtin

H100 = builtin("h100")
MIB = 2**20


@pytest.mark.parametrize(
    ("optimizer", "fp32", "mixed", "fp32_grads", "bf16"),
    [
        (Optimizer.sgd, 8, 8, 10, 4),
        (Optimizer.sgd_momentum, 12, 12, 14, 6),
        (Optimizer.adagrad, 12, 12, 14, 6),
        (Optimizer.rmsprop, 12, 12, 14, 6),
        (Optimizer.adam, 16, 16, 18, 8),
        (Optimizer.adamw, 16, 16, 18, 8),
        (Optimizer.adafactor, 8, 8, 10, 4),
        (Optimizer.lion, 12, 12, 14, 6),
        (Optimizer.muon, 12, 12, 14, 6),
    ],
)
def test_bytes_per_param_table_matches_formulas_5_3(
    optimizer: Optimizer, fp32: float, mixed: float, fp32_grads: float, bf16: float
) -> None:
    got = [bytes_per_param(optimizer, p).total for p in Precision]
    assert got == [fp32, mixed, fp32_grads, bf16]


def test_adam_is_4_4_4_4_in_fp32_and_2_2_12_in_mixed_precision() -> None:
    assert bytes_per_param(Optimizer.adamw, Precision.fp32).breakdown == {
        "params": 4,
        "gradients": 4,
        "master_weights": 0,
        "optimizer_states": 8,
    }
    assert bytes_per_param(Optimizer.adam, Precision.mixed).breakdown == {
        "params": 2,
        "gradients": 2,
        "master_weights": 4,
        "optimizer_states": 8,
    }


def test_8bit_adam_counts_block_absmax() -> None:
    b = bytes_per_param(Optimizer.adam_8bit, Precision.mixed)
    assert b.breakdown["optimizer_states"] == pytest.approx(2 + 2 * 4 / 2048)
    assert b.total == pytest.approx(10.0039, abs=1e-4)


def test_adafactor_state_elements() -> None:
    assert state_elements(Optimizer.adafactor, (4096, 14336)) == 4096 + 14336
    assert state_elements(Optimizer.adafactor, (4096,)) == 4096
    assert state_elements(Optimizer.adam, (3, 5)) == 30


def test_zero_paper_example_7_5b_on_64_gpus() -> None:
    """ZeRO Fig. 1: Ψ = 7.5B, N_d = 64, K = 12: 120 / 31.4 / 16.6 / 1.9 GB per GPU."""
    expected = {Sharding.none: 120.0, Sharding.zero1: 31.4, Sharding.zero2: 16.6, Sharding.zero3: 1.875}
    for sharding, gb in expected.items():
        r = memory(
            7.5e9, H100, optimizer=Optimizer.adam, precision=Precision.mixed, layout=Layout(sharding=sharding), gpus=64
        )
        assert r.per_gpu_bytes / 1e9 == pytest.approx(gb, abs=0.05), sharding
    assert not memory(
        7.5e9, H100, optimizer=Optimizer.adam, precision=Precision.mixed, layout=Layout(sharding=Sharding.none), gpus=64
    ).fits


def test_max_model_is_40b_fully_sharded_and_5b_replicated() -> None:
    datasheet = H100.model_copy(update={"memory_usable": None})
    pooled = max_model(8, datasheet, optimizer=Optimizer.adamw)
    assert pooled.params == pytest.approx(40e9) and pooled.bytes_per_param == 16
    assert pooled.memory_bytes == 640e9
    replicated = max_model(8, datasheet, optimizer=Optimizer.adamw, layout=Layout(sharding=Sharding.none))
    assert replicated.params == pytest.approx(5e9)
    reserved = max_model(8, datasheet, optimizer=Optimizer.adamw, reserve_bytes=parse_reserve("10%", 80e9))
    assert reserved.params == pytest.approx(36e9)
    reported = max_model(8, H100, optimizer=Optimizer.adamw)  # the capacity torch reports: 85,520,809,984 B
    assert reported.params == pytest.approx(8 * 85_520_809_984 / 16)
    assert reported.params_at_datasheet == pytest.approx(40e9) and pooled.params_at_datasheet is None
    assert parse_reserve("4GB", 80e9) == 4e9 and parse_reserve("0.1", 80e9) == 8e9 and parse_reserve("0", 1) == 0


GPT3_LAYER = Model(layers=96, hidden=12288, heads=96, dropout=True)  # Korthikanti's block has dropout
GPT3_WORK = Workload(seq=2048)


@pytest.mark.parametrize(
    ("tp", "sp", "ckpt", "mib"),
    [
        (1, False, Recompute.none, 2736.0),  # s·b·h·(34 + 5as/h)
        (8, False, Recompute.none, 552.0),  # TP
        (8, True, Recompute.none, 342.0),  # TP + SP
        (8, False, Recompute.selective, 312.0),  # TP + selective
        (8, True, Recompute.selective, 102.0),  # TP + SP + selective
        (1, False, Recompute.full, 48.0),  # full recomputation: 2·s·b·h
    ],
)
def test_korthikanti_table_2_for_a_gpt3_layer(tp: int, sp: bool, ckpt: Recompute, mib: float) -> None:
    """Korthikanti et al. 2022 Table 2, GPT-3 175B layer (s=2048, b=1, h=12288, a=96), arXiv:2205.05198."""
    x = ActivationInputs(
        model=GPT3_LAYER, workload=GPT3_WORK, layout=Layout(tensor_parallel=tp, sequence_parallel=sp, recompute=ckpt)
    )
    assert activation_bytes_per_layer(x)[0] / MIB == pytest.approx(mib, abs=1e-9)


def test_flash_attention_drops_the_score_term_but_keeps_statistics() -> None:
    flash = activation_bytes_per_layer(
        ActivationInputs(model=GPT3_LAYER, workload=GPT3_WORK, layout=Layout(tensor_parallel=8), flash_attention=True)
    )
    assert flash[0] / MIB == pytest.approx(312.0 + 96 * 2048 * 4 / 8 / MIB)
    assert "FlashAttention statistics" in flash[1]


def test_max_micro_batch() -> None:
    r = memory(
        7e9,
        H100,
        optimizer=Optimizer.adamw,
        precision=Precision.mixed,
        gpus=8,
        activations=ActivationInputs(
            model=Model(layers=32, hidden=4096, heads=32),
            workload=Workload(seq=4096),
            layout=Layout(recompute=Recompute.full),
        ),
    )
    # 32 layer inputs (full recompute) + int64 token ids + final-norm and output-layer inputs + fp32 logits
    per_sample = 4096 * 4096 * 2 * 32 + 4096 * 8 + 4096 * (2 * 2 * 4096 + 4 * 50257)
    assert r.max_micro_batch == int((85_520_809_984 - 16 * 7e9 / 8) // per_sample)
    assert r.capacity_source == "as reported to torch"


shapes = st.builds(
    Model, layers=st.integers(1, 64), hidden=st.sampled_from([256, 1024, 4096]), heads=st.sampled_from([4, 8, 16])
)
seqs = st.integers(1, 8192)


@given(st.floats(1e6, 1e12), st.floats(1e6, 1e12), st.sampled_from(list(Sharding)), st.integers(1, 512))
def test_memory_grows_with_params(n1: float, n2: float, sharding: Sharding, gpus: int) -> None:
    small, large = sorted((n1, n2))
    a = memory(small, H100, layout=Layout(sharding=sharding), gpus=gpus).per_gpu_bytes
    b = memory(large, H100, layout=Layout(sharding=sharding), gpus=gpus).per_gpu_bytes
    assert a <= b


@given(shapes, seqs, st.integers(1, 64), st.integers(1, 64), st.sampled_from(list(Recompute)), st.booleans())
def test_activations_grow_with_batch_and_sequence(
    shape: Model, seq: int, b1: int, b2: int, ckpt: Recompute, flash: bool
) -> None:
    lo, hi = sorted((b1, b2))
    lay = Layout(recompute=ckpt)

    def per_layer(s: int, b: int, flash: bool = False) -> float:
        work = Workload(seq=s, micro_batch=b)
        return activation_bytes_per_layer(
            ActivationInputs(model=shape, workload=work, layout=lay, flash_attention=flash)
        )[0]

    assert per_layer(seq, lo, flash) <= per_layer(seq, hi, flash)
    assert per_layer(2 * seq, lo) >= per_layer(seq, lo)


@given(st.floats(1e6, 1e12), st.sampled_from(list(OPTIMIZERS)), st.sampled_from(list(PRECISIONS)), st.integers(1, 1024))
def test_sharding_never_increases_per_gpu_memory(n: float, opt: Optimizer, prec: Precision, gpus: int) -> None:
    per = [
        memory(n, H100, optimizer=opt, precision=prec, layout=Layout(sharding=s), gpus=gpus).per_gpu_bytes
        for s in (Sharding.none, Sharding.zero1, Sharding.zero2, Sharding.zero3)
    ]
    assert per == sorted(per, reverse=True)
    assert (
        memory(n, H100, optimizer=opt, precision=prec, layout=Layout(sharding=Sharding.fsdp), gpus=gpus).per_gpu_bytes
        == per[-1]
    )


def test_max_model_that_cannot_hold_its_activations_is_an_answer_of_zero() -> None:
    from napkin import api

    r = api.max_model(model="llama3-8b", gpus=8, flash_attention=False)  # 8k tokens, no recompute: 352 GB
    assert r.params == 0 and r.memory_bytes == 0
    assert "--flash-attention" in r.warnings[0]
    fitted = api.max_model(model="llama3-8b", gpus=8, flash_attention=True, recompute="full")
    assert fitted.params > 0 and not fitted.warnings


def test_max_model_with_a_shape_says_its_states_answer_holds_that_shape_s_activations() -> None:
    """A new user read 'largest model 20.6 B' for 8 H100s and Llama 3 8B's activations as the answer; a 20.6 B
    model keeps more activations, and the answer of that shape is the deepest that fits (12.0 B). The first is
    now said to be the states beside the given shape's activations."""
    from napkin import api
    from napkin.engines.memory.largest import MaxModelResult

    r = api.max_model(model="llama3-8b", gpus=8)
    assert isinstance(r, MaxModelResult)
    rows = dict(r.rows())
    assert "largest model" not in rows and "beside the 8.0 B-param shape's activations" in rows["largest model states"]
    assert r.max_layers_params is not None and r.shape_params is not None
    assert r.shape_params < r.max_layers_params < r.params


def test_the_activations_step_of_explain_adds_up_to_its_result() -> None:
    """--explain's numbers line holds every term of the sum it states (the logits were left out: 1.14 GB × 32 was
    printed as 40.9 GB)."""
    import re

    from napkin import api
    from napkin.units import parse_bytes

    result = api.memory(model="llama3-8b", gpus=8, micro_batch=1)
    [activations] = [s for s in result.steps if s.quantity.startswith("activations on")]
    first, *rest = activations.substituted.split(" + ")
    per_layer, layers, in_flight = first.split(" × ")
    total = parse_bytes(per_layer) * float(layers) * float(in_flight)
    total += sum(parse_bytes(re.sub(r" \(.*\)$", "", term)) for term in rest)
    assert {re.sub(r"^.*\((.*)\)$", r"\1", term) for term in rest} == {"embedding", "logits"}
    assert total == pytest.approx(parse_bytes(activations.result.split(" (")[0]), rel=0.01)


def test_memory_takes_the_global_batch_in_tokens_as_step_and_plan_do() -> None:
    """A new user copied --global-batch-tokens from plan into memory: 'No such option'. 1M tokens of 8,192 is 128
    sequences, the same memory as --global-batch 128."""
    from napkin import api
    from napkin.errors import UsageError

    by_tokens = api.memory(model="llama3-8b", gpus=8, pipeline_parallel=2, global_batch_tokens="1M")
    by_sequences = api.memory(model="llama3-8b", gpus=8, pipeline_parallel=2, global_batch=128)
    assert by_tokens.per_gpu_bytes == by_sequences.per_gpu_bytes
    with pytest.raises(UsageError, match="give global_batch or global_batch_tokens, not both"):
        api.memory(model="llama3-8b", gpus=8, global_batch=128, global_batch_tokens="1M")
