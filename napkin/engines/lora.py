"""LoRA adapters as peft places them: which linear layers of a model's blocks a --lora-targets list adapts, and
the trainable parameters that adds (Hu et al. 2021 §4.1: r·(d_in + d_out) per adapted matrix).

The module names and shapes are transformers 5's (v5.24 modeling_<family>.py); the mapping of target names to
modules is peft's (0.21.2, the version the tests build models with), including its rewrite of transformers-4
expert names into adapters on the fused expert parameters of some mixture-of-experts families (``CONVERTED``).
"""

from __future__ import annotations

from dataclasses import dataclass

from napkin.domain.model import Model
from napkin.errors import UsageError

#: --lora-targets groups: peft's "all-linear" (every nn.Linear / Conv1D but the LM head), and its parts.
ALL_LINEAR = "all-linear"
GROUPS = (ALL_LINEAR, "attention", "mlp", "router")
#: Short names --lora-targets accepts for the Llama-style module names.
ALIASES = {"q": "q_proj", "k": "k_proj", "v": "v_proj", "o": "o_proj", "up": "up_proj", "down": "down_proj"}
#: The default: every linear layer. The QLoRA paper (§4) finds adapters on all linear layers necessary to match
#: full fine-tuning; peft's "all-linear" is that set. Rank 16 is peft's examples' and the QLoRA scripts' choice.
ALL_TARGETS: tuple[str, ...] = (ALL_LINEAR,)
DEFAULT_RANK = 16
#: The module layout: transformers 5 (v5.24), where every mixture-of-experts family keeps its routed experts as fused
#: 3-D parameters (``experts.gate_up_proj`` E × 2F × d, ``experts.down_proj`` E × d × F); shared experts and dense
#: MLPs are nn.Linear; routers are bare parameters except PhiMoE's and Llama 4's ``router`` (nn.Linear subclasses)
#: and Qwen2-MoE's ``shared_expert_gate``. "all-linear" adapts the nn.Linear modules, except in ``CONVERTED``.
MOE_LAYOUT = "transformers 5.24 modeling_<family>.py: routed experts are fused 3-D parameters"
PEFT_VERSION = "peft 0.21.2"
#: peft 0.21.2 utils/transformers_weight_conversion.py (_MOE_TARGET_MODULE_MAPPING, _MOE_FUSED_TARGETS, read with
#: transformers 5.24's conversion_mapping._MODEL_TO_CONVERSION_PATTERN): for these model types peft maps the
#: transformers-4 names of the router and the experts' projections (and "all-linear", which it resolves to the
#: nn.Linear names plus these) to ``target_parameters`` on the router weight and the fused experts, and removes
#: those names from the module targets: the dense MLPs and shared experts, whose modules bear the same names, get
#: no adapter. A fused gate_up_proj gets rank 2r (one r per transformers-4 matrix); each expert parameter's adapter
#: is peft's ParamWrapper with A (E·r' × d_in) and B (d_out × E·r'). Names: (router, gate, up, down).
CONVERTED: dict[str, tuple[str, str, str, str]] = {
    "mixtral": ("gate", "w1", "w3", "w2"),
    "deepseek_v2": ("gate", "gate_proj", "up_proj", "down_proj"),
    "deepseek_v3": ("gate", "gate_proj", "up_proj", "down_proj"),
    "qwen3_moe": ("gate", "gate_proj", "up_proj", "down_proj"),
    "glm4_moe": ("gate", "gate_proj", "up_proj", "down_proj"),
    "olmoe": ("gate", "gate_proj", "up_proj", "down_proj"),
    "ernie4_5_moe": ("gate", "gate_proj", "up_proj", "down_proj"),
    "minimax_m2": ("gate", "w1", "w3", "w2"),  # converted as Mixtral (transformers' _MODEL_TO_CONVERSION_PATTERN)
}
CONVERSION = (
    f"{PEFT_VERSION} utils/transformers_weight_conversion.py: on Mixtral, DeepSeek-V2/V3, Qwen3-MoE, GLM-4.5, OLMoE, "
    "ERNIE 4.5 and MiniMax-M2 the expert names (and all-linear) target the router weight and the fused experts "
    "(gate_up_proj at rank 2r), not the dense or shared MLPs"
)
#: Routers that are nn.Linear modules (peft's "all-linear" adapts them), by model_type.
LINEAR_ROUTER = {"phimoe": "router", "llama4_text": "router"}


@dataclass(frozen=True)
class Linear:
    """One kind of linear layer (nn.Linear or GPT-2's Conv1D), or a parameter peft adapts as one: its name, its
    shape, how many the model has, and its group (attention, mlp, router, experts)."""

    name: str
    d_in: int
    d_out: int
    count: int
    group: str
    scale: int = 1  # the adapter's rank in units of r (peft's ParamWrapper over E fused experts: E·r or E·2r)
    #: a parameter peft adapts through ParamWrapper (a parametrization adding B·A to the weight at each forward):
    #: no r-wide A·x output is kept
    wrapped: bool = False


def _attention(model: Model) -> list[Linear]:
    d, n, mt = model.hidden, model.layers, model.model_type
    kv = model.n_kv * model.d_head
    if model.is_mla:  # DeepSeek-V2 §2.1.2-2.1.3; modeling_deepseek_v3.py DeepseekV3Attention
        assert model.kv_lora_rank is not None and model.rope_head_dim is not None
        a, nope, rope = model.n_heads, model.d_head, model.rope_head_dim
        v = model.v_head_dim or nope
        q = a * (nope + rope)
        qr = model.q_lora_rank
        qs = (
            [Linear("q_a_proj", d, qr, n, "attention"), Linear("q_b_proj", qr, q, n, "attention")]
            if qr
            else [Linear("q_proj", d, q, n, "attention")]
        )
        return [
            *qs,
            Linear("kv_a_proj_with_mqa", d, model.kv_lora_rank + rope, n, "attention"),
            Linear("kv_b_proj", model.kv_lora_rank, a * (nope + v), n, "attention"),
            Linear("o_proj", a * v, d, n, "attention"),
        ]
    fused = model.d_attn + 2 * kv
    if mt == "phi3":  # modeling_phi3.py: one qkv_proj
        return [Linear("qkv_proj", d, fused, n, "attention"), Linear("o_proj", model.d_attn, d, n, "attention")]
    if mt in ("falcon", "gpt_neox"):  # modeling_falcon.py / modeling_gpt_neox.py: query_key_value, dense
        return [Linear("query_key_value", d, fused, n, "attention"), Linear("dense", model.d_attn, d, n, "attention")]
    if mt == "gpt2":  # modeling_gpt2.py: Conv1D c_attn (d → 3d) and c_proj
        return [Linear("c_attn", d, fused, n, "attention"), Linear("c_proj", model.d_attn, d, n, "attention")]
    out = "out_proj" if mt == "gptj" else "o_proj"
    return [
        Linear("q_proj", d, model.d_attn, n, "attention"),
        Linear("k_proj", d, kv, n, "attention"),
        Linear("v_proj", d, kv, n, "attention"),
        Linear(out, model.d_attn, d, n, "attention"),
    ]


def _mlp(model: Model, width: int, count: int) -> list[Linear]:
    d, mt = model.hidden, model.model_type
    if not count:
        return []
    if mt in ("falcon", "gpt_neox"):
        names = ("", "dense_h_to_4h", "dense_4h_to_h")
    elif mt in ("gpt2", "starcoder2"):  # Conv1D in GPT-2, nn.Linear in Starcoder2MLP
        names = ("", "c_fc", "c_proj")
    elif mt == "gptj":
        names = ("", "fc_in", "fc_out")
    elif mt == "phi3":  # Phi3MLP: gate_up_proj (d → 2F), down_proj
        return [Linear("gate_up_proj", d, 2 * width, count, "mlp"), Linear("down_proj", width, d, count, "mlp")]
    else:
        names = ("gate_proj", "up_proj", "down_proj")
    out = [Linear(names[1], d, width, count, "mlp"), Linear(names[2], width, d, count, "mlp")]
    if model.mlp_matrices == 3:
        out.insert(0, Linear(names[0] or "gate_proj", d, width, count, "mlp"))
    return out


def linears(model: Model) -> list[Linear]:
    """The blocks' nn.Linear (and GPT-2 Conv1D) modules as transformers builds them for ``model.model_type``
    (Llama-style names when unknown), mixture-of-experts layers as ``MOE_LAYOUT`` says."""
    out = _attention(model) + _mlp(model, model.d_ffn, model.layers - model.moe_layers)
    moe, mt = model.moe_layers, model.model_type or ""
    if not moe:
        return out
    if model.shared_experts:  # one MLP shared_experts × the expert width (DeepseekV3MoE, Qwen2MoeSparseMoeBlock)
        out += _mlp(model, model.d_expert * model.shared_experts, moe)
    if mt in LINEAR_ROUTER:
        out.append(Linear(LINEAR_ROUTER[mt], model.hidden, model.experts, moe, "router"))
    if mt == "qwen2_moe" and model.shared_experts:
        out.append(Linear("shared_expert_gate", model.hidden, 1, moe, "router"))
    return out


def expert_weights(model: Model) -> int:
    """Routed-expert weights: fused 3-D parameters (``MOE_LAYOUT``), quantized by bitsandbytes, never adapted."""
    return model.moe_layers * model.experts * model.mlp_matrices * model.hidden * model.d_expert


def targets(names: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """What --lora-targets names: a comma-separated list of module names (each family's own, as peft matches
    them), short names (q, k, v, o, up, down) or groups (all-linear, attention, mlp, router); default all-linear.
    ``adapted`` resolves them against a model."""
    if names is None:
        return ALL_TARGETS
    items = [n.strip() for n in (names.split(",") if isinstance(names, str) else names) if str(n).strip()]
    found: list[str] = []
    for item in items:
        key = str(item).lower()
        name = ALIASES.get(key, key)
        if name not in GROUPS and (not name.replace("_", "").isalnum() or name in ("lm_head", "embed_tokens", "wte")):
            raise UsageError(
                f"lora_targets: {item!r} is not a linear layer of the blocks (a module name such as q_proj, "
                f"qkv_proj, query_key_value, c_attn; short names {', '.join(ALIASES)}; or {', '.join(GROUPS)})",
                field="lora_targets",
            )
        if name not in found:
            found.append(name)
    if not found:
        raise UsageError("lora_targets: no module given (e.g. all-linear, or q_proj,v_proj)", field="lora_targets")
    return tuple(found)


def adapted(model: Model, chosen: tuple[str, ...]) -> list[Linear]:
    """The linear layers (and, in ``CONVERTED`` families, the expert parameters) ``chosen`` (module names or groups)
    adapts in ``model``; a UsageError naming lora_targets when they match none (as peft refuses target modules not
    found in the base model) or name one half of a fused gate_up_proj (as peft does)."""
    names = {x.name for x in linears(model)}
    wanted = {x.name for x in linears(model) if x.name in chosen or x.group in chosen or ALL_LINEAR in chosen}
    wanted |= {c for c in chosen if c not in GROUPS}
    old = CONVERTED.get(model.model_type or "") if model.moe_layers else None
    if old is not None:
        if ALL_LINEAR in chosen:
            wanted |= set(old)
        if "router" in chosen:
            wanted.add(old[0])
        picked = [x for x in linears(model) if x.name in wanted - set(old)]
        picked += _converted(model, old, wanted)
    else:
        picked = [x for x in linears(model) if x.name in wanted]
    if not picked:
        raise UsageError(
            f"lora_targets: {', '.join(chosen)} matches no linear layer of this model (its modules: "
            f"{', '.join(sorted(names | set(old or ())))}; or {', '.join(GROUPS)})",
            field="lora_targets",
        )
    return picked


def _converted(model: Model, old: tuple[str, str, str, str], wanted: set[str]) -> list[Linear]:
    """The expert and router parameters peft adapts for the transformers-4 names in ``wanted`` (``CONVERTED``)."""
    router, gate, up, down = old
    d, f, e, n = model.hidden, model.d_expert, model.experts, model.moe_layers
    out = []
    if router in wanted:
        out.append(Linear("gate.weight", d, e, n, "router", wrapped=True))
    if (gate in wanted) != (up in wanted):
        raise UsageError(
            f"lora_targets: {gate} and {up} are one fused gate_up_proj in this model: name both or neither "
            f"({PEFT_VERSION} refuses one alone)",
            field="lora_targets",
        )
    if gate in wanted and model.mlp_matrices == 3:
        out.append(Linear("experts.gate_up_proj", d, 2 * f, n, "experts", scale=2 * e, wrapped=True))
    if down in wanted:
        out.append(Linear("experts.down_proj", f, d, n, "experts", scale=e, wrapped=True))
    return out


def lora_params(model: Model, rank: int, chosen: tuple[str, ...]) -> int:
    """Trainable parameters: Σ over the targeted linear layers of r·(d_in + d_out) (peft's count); a UsageError
    naming lora_rank when r exceeds every adapted layer's smaller side (a rank no matrix there has)."""
    picked = adapted(model, chosen)
    widest = max(min(x.d_in, x.d_out) for x in picked)
    if rank > widest:
        told = " (the default)" if rank == DEFAULT_RANK else ""
        raise UsageError(
            f"lora_rank: {rank:,}{told} is above the rank of every adapted layer (at most {widest:,} here, "
            f"the smaller side of the widest matrix); give a rank up to {widest:,} or other lora_targets",
            field="lora_rank",
            also=("lora_targets",),
        )
    return sum(rank * x.scale * (x.d_in + x.d_out) * x.count for x in picked)


def quantized_weights(model: Model) -> int:
    """Weights bitsandbytes stores in the base format: every linear weight of the blocks, experts included."""
    return sum(x.d_in * x.d_out * x.count for x in linears(model)) + expert_weights(model)


def largest_matrix(model: Model) -> int:
    """Elements of the largest linear weight: the dequantization workspace of a quantized base."""
    sizes = [x.d_in * x.d_out for x in linears(model)]
    if model.is_moe:
        sizes.append(model.hidden * model.d_expert)
    return max(sizes)
