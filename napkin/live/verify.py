"""napkin checks its own formulas against torch (the optional ``bench`` extra).

* FLOPs: ``torch.utils.flop_counter.FlopCounterMode`` on a two-layer MLP (6·N·B exactly) and on a
  GPT-style block (6·N + 12·L·s·d_attn per token, PaLM App. B).
* Memory: each optimizer napkin knows that torch has is stepped once; the bytes of parameters,
  gradients and optimizer-state tensors equal napkin's bytes per parameter (fp32 regime).
* Dtypes: napkin's ranges equal ``torch.finfo``; its rounding equals torch's conversions.
* KV cache: a two-layer GQA attention (8 query heads, 2 KV heads) prefills and decodes with a cache; the
  bytes of the K/V tensors it keeps equal napkin's 2·L·n_kv·d_h·tokens·batch·bytes exactly.
* Activations: bytes saved for backward by a GPT-style block (``saved_tensors_hooks``) against
  Korthikanti et al.'s formula; a ratio, within a documented tolerance (ACTIVATION_TOLERANCE).
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable
from typing import Any

from napkin.domain.base import Record
from napkin.domain.choices import Optimizer, Precision
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.activations import layer_bytes, output_bytes
from napkin.engines.compute import flops_per_token
from napkin.engines.memory import (
    OPTIMIZERS,
    ActivationInputs,
    activation_bytes_per_layer,
    bytes_per_param,
    state_elements,
)
from napkin.engines.number_formats import FORMATS
from napkin.live.bench import import_torch, pick_device
from napkin.results.result import TableResult

#: Saved-for-backward bytes of a real block differ from the paper's accounting (PyTorch also saves
#: LayerNorm statistics, and shares some tensors the paper counts twice). The check passes when
#: measured / formula is within this band.
ACTIVATION_TOLERANCE = (0.8, 1.25)
#: The Llama check counts the same tensors napkin does except the norms' fp32 rstd (4 B per token each, left
#: out by the formula) and the int64 labels (8 B per token): measured / formula must lie within 2 %.
LLAMA_TOLERANCE = (0.98, 1.02)


class Check(Record):
    category: str
    name: str
    expected: float
    measured: float
    ok: bool
    detail: str = ""


class VerifyResult(TableResult):
    """Every check of napkin's formulas against torch, with napkin's figure and torch's."""

    device: str
    torch_version: str
    checks: list[Check]
    passed: int
    failed: int

    def heading(self) -> str:
        return f"napkin verify ({self.device}, torch {self.torch_version})"

    def header(self) -> list[str]:
        return ["area", "check", "napkin", "torch", "", "detail"]

    def align(self) -> str:
        return "llrrll"

    def secondary(self) -> tuple[int, ...]:
        return (5,)

    def body(self) -> list[list[str]]:
        from napkin.results.render import number

        return [
            [c.category, c.name, number(c.expected), number(c.measured), "pass" if c.ok else "FAIL", c.detail]
            for c in self.checks
        ]

    def caption(self) -> str:
        return f"{self.passed} passed, {self.failed} failed"


def _exact(category: str, name: str, expected: float, measured: float, detail: str = "") -> Check:
    ok = math.isclose(expected, measured, rel_tol=1e-12, abs_tol=0) or (math.isnan(expected) and math.isnan(measured))
    return Check(category=category, name=name, expected=expected, measured=measured, ok=ok, detail=detail)


# ------------------------------------------------------------------------------------------- FLOPs


def _mlp_flops(torch: Any, device: str) -> list[Check]:
    from torch.utils.flop_counter import FlopCounterMode

    b, d, k = 32, 64, 16
    x = torch.randn(b, d, device=device, requires_grad=True)  # dX and dW both: backward = 4·m·k·n (PaLM App. B)
    w1 = torch.randn(d, d, device=device, requires_grad=True)
    w2 = torch.randn(d, k, device=device, requires_grad=True)
    n = d * d + d * k
    with FlopCounterMode(display=False) as fwd:
        y = (x @ w1) @ w2
    with FlopCounterMode(display=False) as bwd:
        y.sum().backward()
    forward, backward = fwd.get_total_flops(), bwd.get_total_flops()
    detail = f"B={b}, D={d}, K={k}, N={n}"
    return [
        _exact("flops", "MLP forward = 2·N·B", 2 * n * b, forward, detail),
        _exact("flops", "MLP backward = 4·N·B", 4 * n * b, backward, detail),
        _exact("flops", "MLP total = 6·N·B", 6 * n * b, forward + backward, detail),
    ]


class _Block:
    """A GPT-style block written out in matmuls (pre-LN, MHA, GELU MLP, dropout everywhere)."""

    def __init__(self, torch: Any, shape: Model, device: str, dtype: Any, dropout: float) -> None:
        nn = torch.nn
        d, f = shape.hidden, shape.d_ffn
        self.torch, self.shape, self.p = torch, shape, dropout
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, f, bias=False), nn.Linear(f, d, bias=False)
        self.modules = [self.ln1, self.ln2, self.qkv, self.out, self.up, self.down]
        for m in self.modules:
            m.to(device=device, dtype=dtype)

    def matmul_params(self) -> int:
        return sum(m.weight.numel() for m in (self.qkv, self.out, self.up, self.down))

    def parameters(self) -> list[Any]:
        return [p for m in self.modules for p in m.parameters()]

    def __call__(self, x: Any) -> Any:
        torch, f = self.torch, self.torch.nn.functional
        b, s, d = x.shape
        a = self.shape.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, a, d // a).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // a)
        mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
        probs = f.dropout(scores.masked_fill(~mask, float("-inf")).softmax(-1), self.p)
        attn = (probs @ v).transpose(1, 2).reshape(b, s, d)
        x = x + f.dropout(self.out(attn), self.p)
        return x + f.dropout(self.down(f.gelu(self.up(self.ln2(x)))), self.p)


def _block_flops(torch: Any, device: str) -> Check:
    from torch.utils.flop_counter import FlopCounterMode

    shape, seq = Model(layers=1, hidden=64, heads=4, vocab=1), 32
    block = _Block(torch, shape, device, torch.float32, dropout=0.0)
    b = 2
    x = torch.randn(b, seq, shape.hidden, device=device, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        block(x).sum().backward()
    n = block.matmul_params()
    expected = flops_per_token(n, shape, seq).model * b * seq
    return _exact(
        "flops",
        "GPT block = (6N + 12·L·s·d_attn)·tokens",
        expected,
        counter.get_total_flops(),
        f"L=1, d=64, a=4, s=32, b=2, N_matmul={n} (PaLM App. B, full s×s scores)",
    )


# ------------------------------------------------------------------------------------------ memory

_TORCH_OPTIMIZERS: dict[Optimizer, Callable[[Any, list[Any]], Any]] = {
    Optimizer.sgd: lambda t, p: t.optim.SGD(p, lr=0.1),
    Optimizer.sgd_momentum: lambda t, p: t.optim.SGD(p, lr=0.1, momentum=0.9),
    Optimizer.adagrad: lambda t, p: t.optim.Adagrad(p),
    Optimizer.rmsprop: lambda t, p: t.optim.RMSprop(p),
    Optimizer.adam: lambda t, p: t.optim.Adam(p),
    Optimizer.adamw: lambda t, p: t.optim.AdamW(p),
    Optimizer.adafactor: lambda t, p: t.optim.Adafactor(p),
}


def _optimizer_memory(torch: Any, device: str) -> list[Check]:
    checks = []
    for optimizer, make in _TORCH_OPTIMIZERS.items():
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 32)).to(device)
        params = list(model.parameters())
        opt = make(torch, params)
        model(torch.randn(8, 64, device=device)).square().mean().backward()
        opt.step()
        n = sum(p.numel() for p in params)
        measured = sum(p.numel() * p.element_size() for p in params)
        measured += sum(p.grad.numel() * p.grad.element_size() for p in params)
        for state in opt.state.values():  # scalar tensors (the step counter) are bookkeeping, not per-parameter
            measured += sum(v.numel() * v.element_size() for v in state.values() if torch.is_tensor(v) and v.dim())
        bpp = bytes_per_param(optimizer, Precision.fp32)
        state_bytes = 4 * sum(state_elements(optimizer, tuple(p.shape)) for p in params)
        expected = (bpp.breakdown["params"] + bpp.breakdown["gradients"]) * n + state_bytes
        states = ", ".join(OPTIMIZERS[optimizer].states) or (
            "row/col factors" if optimizer.value == "adafactor" else "none"
        )
        checks.append(
            _exact(
                "memory",
                f"{optimizer} fp32 bytes",
                expected,
                measured,
                f"N={n}: params + grads + states ({states}); napkin {bpp.total:g} B/param",
            )
        )
    return checks


# ------------------------------------------------------------------------------------------ dtypes


def _dtypes(torch: Any) -> list[Check]:
    checks = []
    rng = random.Random(0)
    samples = [1e-8, 3e-8, 1 + 1e-3, 448.0, 464.0, 500.0, 57344.0, 61440.0, 65504.0, 65520.0, 1e39, -2.5]
    samples += [rng.choice((-1, 1)) * 10 ** rng.uniform(-10, 6) for _ in range(2000)]
    samples = [struct.unpack("f", struct.pack("f", s))[0] if abs(s) < 3e38 else s for s in samples]  # fp32-exact
    for fmt in FORMATS.values():
        if fmt.torch_name is None:
            continue
        dtype = getattr(torch, fmt.torch_name)
        info = torch.finfo(dtype)
        for attr, ours in (("max", fmt.max), ("smallest_normal", fmt.smallest_normal), ("eps", fmt.eps)):
            checks.append(_exact("dtypes", f"{fmt.name} {attr} = torch.finfo", ours, float(getattr(info, attr))))
        if fmt.name in ("fp64", "fp32"):
            continue
        source = torch.tensor(samples, dtype=torch.float32)
        theirs = source.to(dtype).to(torch.float64).tolist()
        mismatches = sum(1 for s, t in zip(samples, theirs, strict=True) if not _same(fmt.round(s), t))
        checks.append(
            Check(
                category="dtypes",
                name=f"{fmt.name} rounding = torch conversion",
                expected=0,
                measured=mismatches,
                ok=mismatches == 0,
                detail=f"{len(samples)} fp32 values incl. overflow, subnormals",
            )
        )
    return checks


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# ------------------------------------------------------------------------------------- activations


def _saved_bytes(params: set[int]) -> tuple[dict[tuple[int, int], int], Callable[[Any], Any]]:
    """A saved-tensor pack hook counting each stored buffer once (by storage and offset), parameters excluded."""
    seen: dict[tuple[int, int], int] = {}

    def pack(t: Any) -> Any:
        if t.data_ptr() not in params and t.dim() > 0:
            key = (t.untyped_storage().data_ptr(), t.storage_offset())
            seen[key] = max(seen.get(key, 0), t.numel() * t.element_size())
        return t

    return seen, pack


def _activations(torch: Any, device: str) -> Check:
    shape, seq = Model(layers=1, hidden=256, heads=4, vocab=1, dropout=True), 256
    dtype = torch.bfloat16
    block = _Block(torch, shape, device, dtype, dropout=0.1)
    params = {p.data_ptr() for p in block.parameters()}
    seen, pack = _saved_bytes(params)

    x = torch.randn(1, seq, shape.hidden, device=device, dtype=dtype, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x)
    measured = float(sum(seen.values()))
    expected, _formula = activation_bytes_per_layer(
        ActivationInputs(model=shape, workload=Workload(seq=seq), element_bytes=2)
    )
    ratio = measured / expected
    low, high = ACTIVATION_TOLERANCE
    return Check(
        category="activations",
        name="GPT block saved bytes vs Korthikanti",
        expected=expected,
        measured=measured,
        ok=low <= ratio <= high,
        detail=f"ratio {ratio:.3f} (tolerance {low}–{high}); s=256, h=256, a=4, bf16, dropout",
    )


# ---------------------------------------------------------------------------------------- KV cache


def _kv_cache(torch: Any, device: str) -> Check:
    """Prefill 40 tokens, decode 8 more, with a GQA attention that keeps K and V per layer (bf16)."""
    from napkin.engines.serving import KvDtype, kv_bytes_per_sequence

    shape = Model(layers=2, hidden=256, heads=8, kv_heads=2, head_dim=32, vocab=1)
    a, n_kv, d_h, batch, prompt, new = shape.n_heads, shape.n_kv, shape.d_head, 3, 40, 8
    dtype = torch.bfloat16
    layers = [
        [
            torch.randn(shape.hidden, width, device=device, dtype=dtype) * 0.05
            for width in (a * d_h, n_kv * d_h, n_kv * d_h)
        ]
        for _ in range(shape.layers)
    ]
    cache: list[list[Any]] = [[None, None] for _ in layers]

    def forward(x: Any) -> Any:
        b, s, _ = x.shape
        for (wq, wk, wv), kv in zip(layers, cache, strict=True):
            q = (x @ wq).view(b, s, a, d_h).transpose(1, 2)
            k, v = ((x @ w).view(b, s, n_kv, d_h).transpose(1, 2) for w in (wk, wv))
            kv[0] = k if kv[0] is None else torch.cat([kv[0], k], dim=2)  # the cache holds n_kv heads
            kv[1] = v if kv[1] is None else torch.cat([kv[1], v], dim=2)
            keys, values = (t.repeat_interleave(a // n_kv, dim=1) for t in kv)  # GQA: shared by a/n_kv heads
            causal = s > 1
            out = torch.nn.functional.scaled_dot_product_attention(q, keys, values, is_causal=causal)
            x = x + out.transpose(1, 2).reshape(b, s, a * d_h)[..., : shape.hidden]
        return x

    with torch.no_grad():
        x = forward(torch.randn(batch, prompt, shape.hidden, device=device, dtype=dtype))
        for _ in range(new):
            x = forward(x[:, -1:, :])
    measured = float(sum(t.numel() * t.element_size() for kv in cache for t in kv))
    expected = kv_bytes_per_sequence(shape, prompt + new, KvDtype.bf16) * batch
    detail = f"L=2, a=8, n_kv=2, d_h=32, b={batch}, {prompt}+{new} tokens, bf16"
    return _exact("kv cache", "GQA K/V bytes = 2·L·n_kv·d_h·s·b·2", expected, measured, detail)


def _fused_ops(torch: Any) -> tuple[Any, Any, Any]:
    """The fused kernels napkin's formula assumes, as autograd Functions saving what those kernels save:
    RMSNorm saves its input and fp32 rstd (Apex FusedRMSNorm, Transformer Engine); SwiGLU saves the 2F-wide
    gate‖up tensor (Megatron-LM fused bias_swiglu); the loss saves fp32 softmax and the labels (Megatron-LM
    vocab_parallel_cross_entropy). Eager PyTorch saves more: fp32 copies in rms_norm, 4F in SwiGLU, 8 B/logit."""

    class RMSNorm(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, x: Any, w: Any) -> Any:
            rstd = x.float().pow(2).mean(-1, keepdim=True).add(1e-6).rsqrt()
            ctx.save_for_backward(x, w, rstd)
            return (x.float() * rstd).to(x.dtype) * w

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover - the check runs forward only
            raise NotImplementedError

    class SwiGLU(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, gate_up: Any) -> Any:
            ctx.save_for_backward(gate_up)
            gate, up = gate_up.chunk(2, dim=-1)
            return torch.nn.functional.silu(gate) * up

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    class CrossEntropy(torch.autograd.Function):  # type: ignore[misc]
        @staticmethod
        def forward(ctx: Any, logits: Any, labels: Any) -> Any:
            probs = logits.float().softmax(-1)
            ctx.save_for_backward(probs, labels)
            return -probs.gather(-1, labels.unsqueeze(-1)).log().mean()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    return RMSNorm.apply, SwiGLU.apply, CrossEntropy.apply


def _llama_activations(torch: Any, device: str) -> Check:
    """A Llama block (RMSNorm, GQA, SwiGLU, no dropout, SDPA) + final norm, output layer and loss."""
    f = torch.nn.functional
    shape, seq = (
        Model(
            layers=1,
            hidden=256,
            heads=8,
            kv_heads=2,
            ffn=688,
            vocab=1000,
            mlp="swiglu",
            norm="rmsnorm",
            tied_embeddings=False,
        ),
        256,
    )
    d, a, kv, dh, ffn, vocab = shape.hidden, shape.n_heads, shape.n_kv, shape.d_head, shape.d_ffn, shape.vocab
    dtype = torch.bfloat16
    rms, swiglu, loss_fn = _fused_ops(torch)

    def weight(*size: int) -> Any:
        return (torch.randn(*size, device=device, dtype=dtype) / math.sqrt(size[-1])).requires_grad_()

    w = {
        "n1": weight(d),
        "n2": weight(d),
        "nf": weight(d),
        "qkv": weight((a + 2 * kv) * dh, d),
        "o": weight(d, a * dh),
        "gate_up": weight(2 * ffn, d),
        "down": weight(d, ffn),
        "head": weight(vocab, d),
    }
    params = {t.data_ptr() for t in w.values()}
    seen, pack = _saved_bytes(params)

    x = torch.randn(1, seq, d, device=device, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocab, (1, seq), device=device)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        q, k, v = f.linear(rms(x, w["n1"]), w["qkv"]).split([a * dh, kv * dh, kv * dh], dim=-1)
        q, k, v = (t.view(1, seq, -1, dh).transpose(1, 2) for t in (q, k, v))
        att = f.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        h = x + f.linear(att.transpose(1, 2).reshape(1, seq, a * dh), w["o"])
        h = h + f.linear(swiglu(f.linear(rms(h, w["n2"]), w["gate_up"])), w["down"])
        loss_fn(f.linear(rms(h, w["nf"]), w["head"]), labels)
    measured = float(sum(seen.values()))
    work, lay = Workload(seq=seq), Layout()
    expected = layer_bytes(shape, work, lay, element_bytes=2, flash_attention=True).total + output_bytes(
        shape, work, lay, 2
    )
    ratio = measured / expected
    low, high = LLAMA_TOLERANCE
    return Check(
        category="activations",
        name="Llama block + loss saved bytes vs napkin",
        expected=expected,
        measured=measured,
        ok=low <= ratio <= high,
        detail=f"ratio {ratio:.3f} (tolerance {low}–{high}); s=256, h=256, a=8, n_kv=2, F=688, V=1000, "
        "bf16, SDPA, fused RMSNorm/SwiGLU/loss",
    )


def run(device: str = "cpu") -> VerifyResult:
    torch = import_torch()
    dev = pick_device(torch, device)
    torch.manual_seed(0)
    checks = [
        *_mlp_flops(torch, dev),
        _block_flops(torch, dev),
        *_optimizer_memory(torch, dev),
        *_dtypes(torch),
        _activations(torch, dev),
        _kv_cache(torch, dev),
        _llama_activations(torch, dev),
    ]
    failed = sum(1 for c in checks if not c.ok)
    return VerifyResult(
        device=dev, torch_version=str(torch.__version__), checks=checks, passed=len(checks) - failed, failed=failed
    )
