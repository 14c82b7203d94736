"""Memory per GPU of a layout as the planner asks for it (``StepMemory``): ``napkin.engines.memory``'s own
stage functions, so the planner and ``napkin memory`` agree, their parts memoised as the layer times are."""

from __future__ import annotations

from typing import Any

from napkin.domain.choices import Optimizer, Precision, Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.finetune import Adapters, finetune_bytes
from napkin.engines.memory import (
    ActivationInputs,
    ActivationParts,
    activation_element_bytes,
    activation_parts,
    bytes_per_param,
    gather_buffers,
    rank_layers,
    stack_bytes_per_param,
    stage_activations,
    stage_in_flight,
    stage_indices,
    stage_states,
)
from napkin.engines.step.knobs import Knobs
from napkin.systems.stack import StackKnobs, recipe_memory


class StepMemory:
    """The most loaded GPU's bytes for one model, sequence length, global batch and stack, per layout."""

    def __init__(
        self,
        model: Model,
        seq: int,
        global_batch: int,
        *,
        optimizer: Optimizer,
        precision: Precision,
        flash_attention: bool,
        stack: StackKnobs,
        adapters: Adapters | None,
        fp8: bool = False,
    ) -> None:
        self.model, self.seq, self.batch = model, seq, global_batch
        #: the stack's memory and, under an fp8 recipe, its bytes per kept linear-layer input (None: 16-bit)
        self.framework, self.linear_input_bytes = recipe_memory(stack.framework(), fp8)
        self.flash, self.stack, self.adapters = flash_attention, stack, adapters
        self.params = float(model.params())
        self.rules = self.framework.rules
        self.bpp = stack_bytes_per_param(bytes_per_param(optimizer, precision), self.rules)
        self.element_bytes = activation_element_bytes(precision)
        self._parts: dict[tuple[Any, ...], ActivationParts] = {}
        self._states: dict[tuple[Any, ...], tuple[float, float, bool]] = {}
        self._held: dict[tuple[int, int, int, int], float] = {}

    def inputs(self, k: Knobs, layout: Layout | None = None) -> ActivationInputs:
        """What the activation formula needs for one layout (``k``'s, as ``layout`` when the caller has it): the
        model, the workload and the stack's attention, selective recomputation and loss."""
        return ActivationInputs(
            model=self.model,
            workload=Workload(seq=self.seq, micro_batch=k.micro_batch, global_batch=self.batch),
            layout=layout or k.layout(),
            flash_attention=self.flash,
            selective_keeps=self.stack.selective_keeps,
            logit_bytes=self.stack.logit_bytes,
            linear_input_bytes=self.linear_input_bytes,
        )

    def per_gpu(self, k: Knobs) -> float:
        """Per-GPU bytes of the most loaded pipeline stage, its parts memoised: the activations per shape (t, c, b,
        SP, recompute), the model states and gather buffers per split (stage, t, p, EP, ZeRO, DP·CP) and the
        micro-batches in flight per schedule (stage, p, v, m). With adapters, ``napkin.engines.finetune``'s."""
        if self.adapters is not None:
            parts_ = finetune_bytes(
                self.model,
                self.adapters,
                Workload(seq=self.seq, micro_batch=k.micro_batch),
                recompute=k.recompute,
                flash_attention=self.flash,
                gpus=k.gpus,
                sharding=k.sharding,
            )
            return sum(parts_.values())
        layout: Layout | None = None
        parts = self._activation_parts(k)
        micro = self.batch // (k.micro_batch * k.data_parallel)
        layers, p, fw = self.model.layers, k.pipeline_parallel, self.framework
        worst = 0.0
        for i in stage_indices(layers, p, ends_only=True, rules=self.rules):
            n = rank_layers(layers, p, i, self.rules)
            skey = (i, k.tensor_parallel, p, k.expert_parallel, k.sharding, k.data_parallel * k.context_parallel)
            states = self._states.get(skey)
            if states is None:
                layout = layout or k.layout()
                own = stage_states(i, n, self.model, self.params, layout, self.bpp, self.rules)
                buffers = gather_buffers(n, own.dense_params, self.bpp, layout, fw, own.end_params)
                states = self._states[skey] = (sum(own.states.values()), buffers, own.expert_params > 0)
            hkey = (i, p, k.interleave, micro)
            held = self._held.get(hkey)
            if held is None:
                held = self._held[hkey] = stage_in_flight(i, layout or k.layout(), micro, self.rules)
            acts = stage_activations(
                i, p, n, held, parts, self.rules, experts=states[2], offloaded=k.activation_offload_layers
            )
            total = states[0] + sum(acts.values())
            worst = max(worst, total + fw.fixed + states[1] + fw.fragmentation * (total + states[1]))
        return worst

    def _activation_parts(self, k: Knobs) -> ActivationParts:
        """The activations' parts per shape (t, c, b, SP, recompute), memoised."""
        key = (k.tensor_parallel, k.context_parallel, k.micro_batch, k.sequence_parallel, k.recompute)
        parts = self._parts.get(key)
        if parts is None:
            layout = k.layout()
            parts = self._parts[key] = activation_parts(self.inputs(k, layout), layout, self.element_bytes, self.rules)
        return parts

    def layer_bytes(self, k: Knobs) -> float:
        """One layer's activations for one micro-batch on one GPU (what activation offload copies)."""
        return self._activation_parts(k).per_layer

    def frozen(self) -> float:
        """Bytes of the frozen base as stored (the quantized linear weights, and the rest)."""
        assert self.adapters is not None
        return finetune_bytes(
            self.model, self.adapters, Workload(seq=self.seq), recompute=Recompute.none, flash_attention=True
        )["frozen base"]
