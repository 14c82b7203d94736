"""``napkin bench all-reduce|all-gather|reduce-scatter``: collective bandwidth on torch.distributed.

Registered on ``napkin bench`` (``live_cmds.bench_app``) from this module, so the matmul benchmark's
module stays untouched.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from napkin import units
from napkin.cli.common import JsonOpt, boundary, emit, fail, note, progress
from napkin.errors import UsageError
from napkin.units import format_bandwidth, format_duration

TORCHRUN_HINT = (
    "multi-node: torchrun --nnodes N --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:PORT "
    "-m napkin bench all-reduce --backend nccl"
)


class Backend(StrEnum):
    gloo = "gloo"
    nccl = "nccl"


def _command(op: str) -> Any:
    def command(
        backend: Annotated[
            Backend, typer.Option("--backend", help="gloo (CPU processes) or nccl (GPUs).")
        ] = Backend.gloo,
        world_size: Annotated[
            str, typer.Option("--world-size", "-n", metavar="N", help="Local processes (ignored under torchrun).")
        ] = "2",
        budget: Annotated[
            str, typer.Option("--budget", metavar="SECONDS", help="Time budget, start-up included.")
        ] = "20",
        sizes: Annotated[
            str | None,
            typer.Option("--sizes", metavar="SIZE,…", help="Sizes S, e.g. 1MiB,64MiB (default 64KiB to 256MiB, ×4)."),
        ] = None,
        cluster: Annotated[
            str | None, typer.Option("--cluster", "-c", metavar="NAME", help="With --save: the cluster it ran on.")
        ] = None,
        save: Annotated[
            bool, typer.Option("--save", help="Keep the best busbw for --cluster ('napkin comm --bandwidth measured').")
        ] = False,
        as_json: JsonOpt = False,
    ) -> None:
        import time

        from napkin.live import bench_comm

        started = time.time()  # the budget counts from here: importing torch is part of it
        with boundary():
            n = units.parse_int(world_size, "--world-size")
            seconds = units.parse_duration(budget, "--budget")
            size_list = bench_comm.parse_sizes(sizes) if sizes else list(bench_comm.DEFAULT_SIZES)
            if save:  # everything --save needs, checked before the benchmark runs
                from napkin.systems.cluster import find
                from napkin.systems.measurements import load_all

                if cluster is None:
                    raise UsageError("--save: give --cluster NAME, the cluster this ran on (see 'napkin cluster list')")
                find(cluster)
                load_all()
            bench_comm.prepare(op, backend.value, n, seconds, size_list)  # errors before the progress bar
            with progress(op) as update:
                result = bench_comm.run(
                    op,
                    backend=backend.value,
                    world_size=n,
                    budget=seconds,
                    sizes=size_list,
                    progress=update,
                    started=started,
                )
        if result is None:  # a rank other than 0 under torchrun: rank 0 reports
            return
        emit(result, as_json)  # the measured numbers first: a failed save cannot lose them
        if save and cluster is not None and result.best is not None:
            with boundary():
                path = bench_comm.save_best(result, cluster)
            note(f"saved {op} busbw {format_bandwidth(result.best.busbw)} for {cluster} in {path}")
        if result.best is None:
            fail(
                f"nothing measured within the {format_duration(seconds)} budget (see the reasons above); raise "
                "--budget or pass smaller --sizes",
                1,
            )

    command.__doc__ = (
        f"Measure {op} algbw/busbw on torch.distributed as nccl-tests does (local processes, or "
        f"one rank of a torchrun job; {TORCHRUN_HINT})."
    )
    return command


def register(bench_app: typer.Typer) -> None:
    for op in ("all-reduce", "all-gather", "reduce-scatter"):
        bench_app.command(op)(_command(op))


__all__ = ["register"]
