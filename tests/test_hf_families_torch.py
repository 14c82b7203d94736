"""The families added in issue 23/24 against transformers and peft themselves: the model transformers 5.24 builds
from each released config.json (on the meta device: shapes, no memory) holds napkin's parameter count, and peft
0.21.2's LoRA on a tiny config of each family trains napkin's adapter count."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from napkin.domain.hf_config import read_config
from napkin.engines.lora import linears, lora_params, targets
from tests.conftest import HAS_TORCH

DATA = Path(__file__).parent / "data" / "hf_configs"
HAS_PEFT = HAS_TORCH and all(importlib.util.find_spec(name) is not None for name in ("peft", "transformers"))
needs_peft = pytest.mark.skipif(not HAS_PEFT, reason="needs torch, peft and transformers (the dev group)")
pytestmark = [
    pytest.mark.torch,
    needs_peft,
    pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning", "ignore::UserWarning"),
]

#: released configs of families transformers 5.24 builds natively (Kimi K2 is remote code; the multimodal ones are
#: checked through their text decoders in tests/test_hf_families.py)
NATIVE = [
    "glm-4.5-air",
    "glm-4.6",
    "olmoe-1b-7b",
    "granite-3.3-8b",
    "granite-3.1-3b-a800m",
    "starcoder2-7b",
    "minitron-4b",
    "smollm3-3b",
    "aya-23-8b",
    "minimax-m2.5",
    "ernie-4.5-21b-a3b",
    "exaone-4.0-32b",
]


def built(config: dict[str, Any]) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    data = {k: v for k, v in config.items() if k != "_name_or_path"}
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        auto: Any = AutoModelForCausalLM
        return auto.from_config(AutoConfig.for_model(**data))


@pytest.mark.parametrize("name", NATIVE)
def test_the_model_transformers_builds_holds_napkins_parameter_count(name: str) -> None:
    """parameters() counts a tied table once; GLM's e_score_correction_bias is a buffer the checkpoint stores."""
    config = json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))
    model = built(config)
    counted = sum(p.numel() for p in model.parameters())
    counted += sum(b.numel() for n, b in model.named_buffers() if n.endswith("e_score_correction_bias"))
    assert read_config(config).model.params() == counted


#: tiny configs of each new family's module layout (peft adapts the nn.Linear modules; on GLM-4.5 and OLMoE it
#: converts the fused experts and the router weight, as on DeepSeek and Qwen3-MoE)
TINY: dict[str, dict[str, Any]] = {
    "glm4_moe": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "n_routed_experts": 4,
        "n_shared_experts": 1,
        "num_experts_per_tok": 2,
        "first_k_dense_replace": 1,
        "attention_bias": True,
        "use_qk_norm": True,
        "n_group": 1,
        "topk_group": 1,
    },
    "olmoe": {
        "hidden_size": 64,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
    },
    "granitemoe": {
        "hidden_size": 64,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "starcoder2": {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4},
    "nemotron": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "granite": {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4},
    "cohere": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "use_qk_norm": True,
    },
    "ernie4_5_moe": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "moe_intermediate_size": 32,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "moe_num_experts": 4,
        "moe_k": 2,
        "moe_num_shared_experts": 2,
        "moe_layer_start_index": 1,
        "use_bias": True,
    },
    "exaone4": {
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "minimax_m2": {
        "hidden_size": 64,
        "intermediate_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
    },
    "smollm3": {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4},
}
CASES = [(f, t) for f in sorted(TINY) for t in ("all-linear", "attention", "mlp")]


@pytest.mark.parametrize(("family", "peft_targets"), CASES)
def test_lora_trainable_parameters_equal_peft(family: str, peft_targets: str) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.for_model(
        family, vocab_size=128, pad_token_id=0, bos_token_id=1, eos_token_id=2, **TINY[family]
    )
    arch = read_config(config.to_dict()).model
    names: str | list[str] = "all-linear"
    if peft_targets != "all-linear":
        names = sorted({x.name for x in linears(arch) if x.group == peft_targets})
        # OLMoE's MLP is its fused experts: the transformers-4 names peft 0.21.2 converts
        names = names or {"olmoe": ["down_proj", "gate_proj", "up_proj"], "minimax_m2": ["w1", "w2", "w3"]}.get(
            family, []
        )
        if not names:
            pytest.skip(f"{family} has no {peft_targets} nn.Linear")
    with warnings.catch_warnings(), torch.device("meta"):
        warnings.simplefilter("ignore")
        auto: Any = AutoModelForCausalLM
        model = get_peft_model(auto.from_config(config), LoraConfig(r=8, target_modules=names))
    counted = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lora_params(arch, 8, targets(names)) == counted


def test_qwen2_5_vl_reads_the_same_whether_flat_or_as_transformers_5_nests_it() -> None:
    """transformers 5.24's Qwen2_5_VLConfig writes the decoder under text_config (model_type qwen2_5_vl_text); the
    released config.json has it at the top level: one Model either way."""
    from transformers import AutoConfig

    flat = json.loads((DATA / "qwen2.5-vl-7b.json").read_text(encoding="utf-8"))
    data = {k: v for k, v in flat.items() if k != "_name_or_path"}
    nested = AutoConfig.for_model(**data).to_dict()
    assert isinstance(nested.get("text_config"), dict)
    assert read_config(nested).model.params() == read_config(flat).model.params() == 7_615_616_512
