"""``Workload``: what a run feeds the model — sequence length, micro-batch, global batch, total tokens."""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from napkin.domain.base import Record


class Workload(Record):
    """Sequences of ``seq`` tokens, ``micro_batch`` per GPU per step, ``global_batch`` per optimizer step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(gt=0, description="s, tokens per sequence")
    micro_batch: int = Field(default=1, gt=0, description="b, sequences per GPU per forward/backward")
    global_batch: int | None = Field(default=None, gt=0, description="B, sequences per optimizer step")
    tokens: float | None = Field(default=None, gt=0, description="D, tokens over the whole run")

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        if self.global_batch is not None and self.global_batch < self.micro_batch:
            raise ValueError(f"global_batch ({self.global_batch}) is smaller than micro_batch ({self.micro_batch})")
        return self

    @classmethod
    def from_batch_tokens(cls, seq: int, batch_tokens: float, **kwargs: object) -> Workload:
        """A global batch given in tokens (e.g. 4M) is rounded to whole sequences of ``seq``."""
        return cls.model_validate({"seq": seq, "global_batch": max(1, round(batch_tokens / seq)), **kwargs})

    @property
    def global_batch_tokens(self) -> int | None:
        return None if self.global_batch is None else self.global_batch * self.seq

    def microbatches(self, data_parallel: int) -> int:
        """m = B / (b·DP): micro-batches each pipeline processes per step (Narayanan et al. 2021 §2.2)."""
        if self.global_batch is None:
            return 1
        per_replica, rest = divmod(self.global_batch, self.micro_batch * data_parallel)
        if rest or per_replica == 0:
            raise ValueError(f"global_batch ({self.global_batch}) must be {self.batch_rule(data_parallel)}")
        return per_replica

    def batch_rule(self, data_parallel: int) -> str:
        """What the global batch must be on ``data_parallel`` replicas, in words."""
        return (
            f"a multiple of micro_batch × data parallel ({self.micro_batch} × {data_parallel} = "
            f"{self.micro_batch * data_parallel})"
        )
