"""Memory per GPU of a layout as the planner asks for it (``StepMemory``): ``napkin.engines.memory``'s own
stage functions, so the planner and ``napkin memory`` agree, their parts memoised as the layer times are."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from napkin.domain.choices import Optimizer, Precision, Recompute
from napkin.domain.layout import Layout
from napkin.domain.model import Model
from napkin.domain.workload import Workload
from napkin.engines.memory import (
    GPUS_PER_NODE,
    ActivationInputs,
    ActivationParts,
    activation_element_bytes,
    activation_parts,
    bytes_per_param,
    gather_buffers,
    held_stages,
    rank_layers,
    stack_bytes_per_param,
    stage_in_flight,
    stage_indices,
    stage_states,
)
from napkin.engines.step.knobs import Knobs
from napkin.systems.stack import StackKnobs, recipe_memory

if TYPE_CHECKING:
    from napkin.engines.finetune import Adapters


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
        dtype: str = "bf16",
        domain: int = GPUS_PER_NODE,
    ) -> None:
        self.model, self.seq, self.batch = model, seq, global_batch
        #: the stack's memory and, under an fp8 or fp4 recipe, its bytes per kept linear-layer input (None: 16-bit)
        self.framework, self.linear_input_bytes = recipe_memory(stack.framework(), dtype)
        self.flash, self.stack, self.adapters = flash_attention, stack, adapters
        self.domain = domain  # the scale-up domain HSDP shards within
        self.params = float(model.params())
        self.rules = self.framework.rules
        self.bpp = stack_bytes_per_param(bytes_per_param(optimizer, precision), self.rules)
        self.element_bytes = activation_element_bytes(precision)
        self._parts: dict[tuple[Any, ...], ActivationParts] = {}
        #: per split (t, p, EP, ZeRO, DP·CP): each candidate stage's (state bytes, gather buffers, holds experts)
        self._states: dict[tuple[Any, ...], tuple[tuple[float, float, bool], ...]] = {}
        #: per schedule (p, v, micro-batches): each candidate stage's (layers, in flight, first, last)
        self._held: dict[tuple[int, int, int], tuple[tuple[int, float, bool, bool], ...]] = {}

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
        SP, recompute), the stages' model states and gather buffers per split (t, p, EP, ZeRO, DP·CP) and their
        micro-batches in flight per schedule (p, v, m): only the sum of ``stage_activations``' parts is left per
        layout (tests/test_memory_stacks.py and tests/test_offload.py check it against ``napkin memory``). With
        adapters, ``napkin.engines.finetune``'s."""
        if self.adapters is not None:
            from napkin.engines.finetune import finetune_bytes  # only with adapters (start-up time)

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
        parts = self._activation_parts(k)
        micro = self.batch // (k.micro_batch * k.data_parallel)
        p = k.pipeline_parallel
        skey = (k.tensor_parallel, p, k.expert_parallel, k.sharding, k.data_parallel * k.context_parallel)
        states = self._states.get(skey)
        if states is None:
            states = self._states[skey] = self._stage_states(k)
        hkey = (p, k.interleave, micro)
        stages = self._held.get(hkey)
        if stages is None:
            stages = self._held[hkey] = self._stages_in_flight(k, micro)
        fw, offloaded = self.framework, k.activation_offload_layers
        fixed, fragmentation = fw.fixed, fw.fragmentation
        per_layer, embedding, output, buffers = parts.per_layer, parts.embedding, parts.output, parts.buffers
        worst = 0.0
        for (own, gathered, experts), (n, held, first, last) in zip(states, stages, strict=True):
            # stage_activations' parts, summed in its order: the layers' × in flight, the embedding, the logits,
            # the all-to-all buffers
            acts = per_layer * (n - offloaded) * held + (embedding * held if first else 0.0) + (output if last else 0.0)
            if buffers and experts:
                acts += buffers
            total = own + acts
            worst = max(worst, total + fixed + gathered + fragmentation * (total + gathered))
        return worst

    def _stage_states(self, k: Knobs) -> tuple[tuple[float, float, bool], ...]:
        """Per stage that can be the most loaded (``stage_indices``): its model states' bytes, the stack's gather
        buffers, whether it holds routed experts, under ``k``'s split (t, p, EP, ZeRO, DP·CP)."""
        layout, layers, p = k.layout(), self.model.layers, k.pipeline_parallel
        out = []
        for i in stage_indices(layers, p, ends_only=True, rules=self.rules):
            n = rank_layers(layers, p, i, self.rules)
            own = stage_states(i, n, self.model, self.params, layout, self.bpp, self.rules, self.domain)
            buffers = gather_buffers(n, own.dense_params, self.bpp, layout, self.framework, own.end_params)
            out.append((sum(own.states.values()), buffers, own.expert_params > 0))
        return tuple(out)

    def _stages_in_flight(self, k: Knobs, micro: int) -> tuple[tuple[int, float, bool, bool], ...]:
        """Per stage that can be the most loaded (``stage_indices``): its layers, the micro-batches in flight of
        them, whether it holds the first stage (the embedding) and the last (the logits), under ``k``'s pipeline
        (p, v) and ``micro`` micro-batches a step."""
        layout, layers, p = k.layout(), self.model.layers, k.pipeline_parallel
        out = []
        for i in stage_indices(layers, p, ends_only=True, rules=self.rules):
            held = held_stages(i, p, self.rules)
            n = rank_layers(layers, p, i, self.rules)
            out.append((n, stage_in_flight(i, layout, micro, self.rules), 0 in held, p - 1 in held))
        return tuple(out)

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
        from napkin.engines.finetune import finetune_bytes

        return finetune_bytes(
            self.model, self.adapters, Workload(seq=self.seq), recompute=Recompute.none, flash_attention=True
        )["frozen base"]
