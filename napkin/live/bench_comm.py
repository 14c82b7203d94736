"""Measured collective bandwidth on ``torch.distributed`` (gloo on CPUs, NCCL on GPUs), as nccl-tests reports it.

``run`` either starts ``world_size`` local worker processes (``python -m napkin.live.bench_comm``) or, under
``torchrun``, is itself one rank of the job. Each size is timed the nccl-tests way (``src/common.cu``):
warm-up first; every timed repetition starts after a barrier (and a device synchronise); a repetition's
time is the slowest rank's (``all_reduce`` MAX of the per-rank times); the median over repetitions is kept;
``algbw = S / t`` and ``busbw = algbw × bus factor`` (``napkin.engines.comm.bus_factor``, nccl-tests
``doc/PERFORMANCE.md``). Sizes run smallest first; rank 0 predicts each size's cost from the previous one
and stops before the budget would be exceeded, and tells every rank (a broadcast), so all ranks agree.

Local launch: the parent hosts the rendezvous store on a port the OS picks (``TCPStore`` on port 0), so a
fixed port is never taken; a rank that dies, or a run past the budget, ends every worker (terminate, then
kill) and raises one error line naming the rank and its last message.

torch is imported inside the functions: ``import napkin`` never imports it.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any, ClassVar, Final

from pydantic import ConfigDict, Field

from napkin.domain.base import Record
from napkin.engines.comm import bus_factor
from napkin.errors import NapkinError, UsageError
from napkin.live.bench import import_torch
from napkin.results.result import TableResult
from napkin.units import format_bandwidth, format_bytes_iec, parse_bytes

OPS: Final = ("all-reduce", "all-gather", "reduce-scatter")
BACKENDS: Final = ("gloo", "nccl")
WARMUP: Final = 2
MIN_REPEATS: Final = 3
MAX_REPEATS: Final = 50
#: Default sizes: 64 KiB to 256 MiB, ×4 (nccl-tests sweeps with -b/-e/-f the same way).
DEFAULT_SIZES: Final = tuple(2**k for k in range(16, 29, 2))
#: Seconds of the budget kept for the workers to exit and the result to be read: at least this, or half
#: of what a worker took to start (a loaded machine is as slow to tear torch down as to bring it up).
TEARDOWN: Final = 1.5
SHUTDOWN_GRACE: Final = 20.0  # seconds a launch may run past the budget for start-up and tear-down
Progress = Callable[[str, float], None]


class CommRecord(Record):
    """One size: the median time and nccl-tests' algorithm and bus bandwidths (bytes/s)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    backend: str
    world_size: int
    op: str
    bytes: int = Field(description="S as nccl-tests counts it (all-gather: output; reduce-scatter: input)")
    seconds: float = Field(description="median over repetitions of the slowest rank's time")
    algbw: float
    busbw: float
    repeats: int


class CommBenchResult(TableResult):
    """Every size measured (``records``), the best bus bandwidth, and the sizes the budget left out."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    headline: ClassVar[tuple[str, ...]] = ("op", "backend", "world_size")
    backend: str
    world_size: int
    op: str
    device: str
    torch_version: str
    records: list[CommRecord]
    best: CommRecord | None
    skipped: list[int] = Field(default_factory=list, description="sizes left out to stay within the budget")

    def heading(self) -> str:
        return f"{self.op}: {self.backend}, {self.world_size} ranks ({self.device}, torch {self.torch_version})"

    def header(self) -> list[str]:
        return ["size", "time µs", "algbw", "busbw", "reps"]

    def body(self) -> list[list[str]]:
        return [
            [
                format_bytes_iec(r.bytes),
                f"{r.seconds * 1e6:,.0f}",
                format_bandwidth(r.algbw),
                format_bandwidth(r.busbw),
                str(r.repeats),
            ]
            for r in self.records
        ]

    def caption(self) -> str | None:
        best = f"best busbw {format_bandwidth(self.best.busbw)}" if self.best else "no result"
        return f"{best}; median of the slowest rank per repetition; busbw as nccl-tests"

    def to_json(self, explain: bool = False) -> Any:
        return [rec.model_dump(mode="json", exclude={"repeats"}) for rec in self.records]  # one record per size


def under_torchrun() -> bool:
    """True when this process is one rank of a ``torchrun`` job (it sets RANK, WORLD_SIZE, MASTER_ADDR)."""
    return all(key in os.environ for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def check(op: str, backend: str, world_size: int, budget: float, sizes: Sequence[int]) -> None:
    if op not in OPS:
        raise UsageError(f"op: {op!r} is not one of: {', '.join(OPS)}")
    if backend not in BACKENDS:
        raise UsageError(f"--backend: {backend!r} is not one of: {', '.join(BACKENDS)}")
    if world_size < 2:
        raise UsageError(f"--world-size: {world_size} must be at least 2")
    if not budget > 0:
        raise UsageError(f"--budget: {budget!r} must be positive")
    if not sizes or any(s < world_size * 4 for s in sizes):
        raise UsageError(f"--sizes: each size must hold at least one float32 per rank ({world_size * 4} B)")


def _check_backend(torch: Any, backend: str, world_size: int, local: bool) -> None:
    dist = torch.distributed
    if not dist.is_available():
        raise UsageError("--backend: this torch was built without torch.distributed")
    if backend == "gloo" and not dist.is_gloo_available():
        raise UsageError("--backend gloo: this torch has no gloo; use --backend nccl on GPUs")
    if backend == "nccl":
        if not dist.is_nccl_available() or not torch.cuda.is_available():
            raise UsageError("--backend nccl: this torch has no NCCL or sees no CUDA device; use --backend gloo")
        if local and torch.cuda.device_count() < world_size:
            raise UsageError(
                f"--world-size: {world_size} ranks need {world_size} GPUs for NCCL; "
                f"torch sees {torch.cuda.device_count()}"
            )


def parse_sizes(text: str) -> list[int]:
    """``--sizes 1MiB,64MiB``: message sizes S in bytes."""
    return [int(parse_bytes(part.strip(), "--sizes")) for part in text.split(",") if part.strip()]


def prepare(op: str, backend: str, world_size: int, budget: float, sizes: Sequence[int]) -> tuple[Any, int]:
    """Check every input and the backend before anything starts; (torch, the world size that will run)."""
    torch = import_torch()
    world = int(os.environ["WORLD_SIZE"]) if under_torchrun() else world_size
    check(op, backend, world, budget, sizes)
    _check_backend(torch, backend, world, local=not under_torchrun())
    return torch, world


def run(
    op: str = "all-reduce",
    *,
    backend: str = "gloo",
    world_size: int = 2,
    budget: float = 20.0,
    sizes: Sequence[int] = DEFAULT_SIZES,
    progress: Progress | None = None,
    started: float | None = None,
) -> CommBenchResult | None:
    """Benchmark ``op`` within ``budget`` seconds counted from ``started`` (``time.time()``; default: now).

    Under torchrun, ranks other than 0 return None.
    """
    start = time.time() if started is None else started
    sizes = sorted(set(sizes))
    torch, world = prepare(op, backend, world_size, budget, sizes)
    if under_torchrun():
        end = start + budget
        return _worker(torch, int(os.environ["RANK"]), world, backend, op, sizes, end, start, None, progress)
    return _launch(torch, op, backend, world, budget, sizes, progress, start)


# ------------------------------------------------------------------------------------------ launcher


def _launch(
    torch: Any,
    op: str,
    backend: str,
    world_size: int,
    budget: float,
    sizes: Sequence[int],
    progress: Progress | None,
    start: float | None = None,
) -> CommBenchResult:
    launched = time.time()
    end = (start or launched) + budget
    store = torch.distributed.TCPStore(
        "127.0.0.1", 0, world_size + 1, True, timedelta(seconds=budget + 30), wait_for_workers=False
    )  # the OS picks the port
    with tempfile.TemporaryDirectory(prefix="napkin-bench-") as tmp:
        work = Path(tmp)
        config = {
            "op": op,
            "backend": backend,
            "world_size": world_size,
            "sizes": list(sizes),
            "end": end,
            "launched": launched,
            "port": store.port,
            "dir": str(work),
        }
        env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        procs: list[subprocess.Popen[str]] = []
        try:
            for rank in range(world_size):
                err = (work / f"rank{rank}.stderr").open("w")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "napkin.live.bench_comm", json.dumps({**config, "rank": rank})],
                        stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                        stderr=err,
                        text=True,
                        env=env,
                    )
                )
                err.close()
            reader = threading.Thread(target=_relay, args=(procs[0], progress), daemon=True)
            reader.start()
            _wait(procs, work, end + SHUTDOWN_GRACE, budget)
            reader.join(timeout=1)
        finally:
            _stop(procs)
            del store
        result = work / "result.json"
        if not result.is_file():
            raise NapkinError(f"bench {op}: rank 0 finished without a result; see {_last_line(work, 0)}")
        return CommBenchResult.model_validate_json(result.read_text(encoding="utf-8"))


def _relay(proc: subprocess.Popen[str], progress: Progress | None) -> None:
    """Rank 0's progress lines (``fraction<TAB>label``) to the caller's callback."""
    assert proc.stdout is not None
    for line in proc.stdout:
        fraction, _, label = line.rstrip("\n").partition("\t")
        if progress is not None:
            try:
                progress(label, float(fraction))
            except ValueError:
                continue


def _wait(procs: Sequence[subprocess.Popen[str]], work: Path, hard_deadline: float, budget: float) -> None:
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                raise NapkinError(
                    f"bench: rank {rank} of {len(procs)} exited with code {code}: {_last_line(work, rank)}"
                )
        if all(code == 0 for code in codes):
            return
        if time.time() > hard_deadline:
            raise NapkinError(
                f"bench: the workers were still running {SHUTDOWN_GRACE:g} s after the "
                f"{budget:g} s budget and were stopped"
            )
        time.sleep(0.05)


def _stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """Terminate every worker still running, then kill what does not exit; reap all (no orphans)."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _last_line(work: Path, rank: int) -> str:
    error = work / f"rank{rank}.error"
    if error.is_file():
        return error.read_text(encoding="utf-8").strip()
    try:
        lines = [line for line in (work / f"rank{rank}.stderr").read_text(encoding="utf-8").splitlines() if line]
    except OSError:
        lines = []
    return lines[-1].strip() if lines else "no message (killed by a signal?)"


# ------------------------------------------------------------------------------------------ worker


def _worker(
    torch: Any,
    rank: int,
    world_size: int,
    backend: str,
    op: str,
    sizes: Sequence[int],
    end: float,
    launched: float,
    store: Any,
    progress: Progress | None,
) -> CommBenchResult | None:
    if op not in OPS:  # a worker checks its orders before joining the group
        raise ValueError(f"op {op!r} is not one of: {', '.join(OPS)}")
    dist = torch.distributed
    timeout = timedelta(seconds=max(60.0, end - time.time() + 30))
    if backend == "nccl":
        local = int(os.environ.get("LOCAL_RANK", rank))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    else:
        device = "cpu"
    if store is None:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world_size, timeout=timeout)
    else:
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout)
    try:
        deadline = end - max(TEARDOWN, 0.5 * (time.time() - launched))  # rank 0's clock decides
        records, skipped = _sweep(torch, rank, world_size, backend, op, device, sizes, deadline, progress)
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return None
    best = max(records, key=lambda r: r.busbw, default=None)
    name = torch.cuda.get_device_name(device) if backend == "nccl" else "cpu"
    warnings = []
    if skipped:
        warnings.append(f"sizes left out to stay within the budget: {', '.join(format_bytes_iec(x) for x in skipped)}")
    if not records:
        warnings.append("no size finished within the budget (start-up counts); give a larger --budget")
    return CommBenchResult(
        backend=backend,
        world_size=world_size,
        op=op,
        device=name,
        torch_version=str(torch.__version__),
        records=records,
        best=best,
        skipped=skipped,
        warnings=warnings,
    )


def _collective(torch: Any, op: str, nbytes: int, n: int, device: str) -> tuple[Callable[[], Any], int]:
    """The operation on float32 buffers, and S rounded down to whole elements per rank."""
    dist = torch.distributed
    per_rank = max(1, nbytes // 4 // n)
    total = per_rank * n
    if op == "all-reduce":
        buf = torch.ones(total, dtype=torch.float32, device=device)
        return (lambda: dist.all_reduce(buf)), total * 4
    if op == "all-gather":
        src = torch.ones(per_rank, dtype=torch.float32, device=device)
        out = torch.empty(total, dtype=torch.float32, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return (lambda: gather(out, src)), total * 4
    src = torch.ones(total, dtype=torch.float32, device=device)
    out = torch.empty(per_rank, dtype=torch.float32, device=device)
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    return (lambda: scatter(out, src)), total * 4


def _sweep(
    torch: Any,
    rank: int,
    n: int,
    backend: str,
    op: str,
    device: str,
    sizes: Sequence[int],
    deadline: float,
    progress: Progress | None,
) -> tuple[list[CommRecord], list[int]]:
    dist = torch.distributed
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    flag = torch.zeros(1, dtype=torch.float64, device=device)
    records: list[CommRecord] = []
    skipped: list[int] = []
    per_byte: float | None = None  # seconds per byte seen so far, to predict the next size

    def agree(value: bool) -> bool:
        """Rank 0's decision, on every rank (a broadcast)."""
        flag[0] = float(value)
        dist.broadcast(flag, 0)
        return bool(flag[0].item())

    for index, size in enumerate(sizes):
        size_end = math.inf
        fits = False
        if rank == 0:
            left = deadline - time.time()
            size_end = time.time() + max(0.05, min(2.0, left / (len(sizes) - index)))
            guess = per_byte * size if per_byte is not None else 0.0
            fits = left > 0 and guess * (WARMUP + MIN_REPEATS) * 1.5 < left
            if progress is not None:
                progress(f"{op} {size:,} B", index / len(sizes))
        if not agree(fits):
            skipped = list(sizes[index:])
            break
        fn, nbytes = _collective(torch, op, size, n, device)
        for _ in range(WARMUP):
            fn()
        sync()
        times: list[float] = []
        while True:
            now = time.time()
            more = len(times) < MIN_REPEATS or (len(times) < MAX_REPEATS and now < size_end)
            if not agree(rank == 0 and more and (now < deadline or not times)):
                break
            dist.barrier()
            sync()
            start = time.perf_counter()
            fn()
            sync()
            times.append(time.perf_counter() - start)
        slowest = torch.tensor(times, dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        seconds = statistics.median(slowest.tolist())
        per_byte = seconds / nbytes
        algbw = nbytes / seconds
        records.append(
            CommRecord(
                backend=backend,
                world_size=n,
                op=op,
                bytes=nbytes,
                seconds=seconds,
                algbw=algbw,
                busbw=algbw * bus_factor(op, n),
                repeats=len(times),
            )
        )
        del fn
    if rank == 0 and progress is not None:
        progress("done", 1.0)
    return records, skipped


def save_best(result: CommBenchResult, cluster: str) -> Path | None:
    """Keep the best bus bandwidth of ``result`` for (cluster, op) in napkin's measurements file."""
    from napkin.systems.measurements import save_comm

    if result.best is None:
        return None
    best = result.best
    return save_comm(
        cluster,
        result.op,
        {
            "busbw": best.busbw,
            "algbw": best.algbw,
            "bytes": best.bytes,
            "backend": result.backend,
            "world_size": result.world_size,
            "device": result.device,
            "torch_version": result.torch_version,
            "date": date.today().isoformat(),
        },
    )


def _main(argv: Sequence[str]) -> int:
    """One local worker: ``python -m napkin.live.bench_comm '<json config>'`` (started by ``_launch``)."""
    config = json.loads(argv[0])
    rank, work = int(config["rank"]), Path(config["dir"])
    torch = import_torch()

    def report(label: str, fraction: float) -> None:
        print(f"{fraction:.4f}\t{label}", flush=True)

    try:
        store = torch.distributed.TCPStore(
            "127.0.0.1", int(config["port"]), int(config["world_size"]) + 1, False, timedelta(seconds=30)
        )
        result = _worker(
            torch,
            rank,
            int(config["world_size"]),
            config["backend"],
            config["op"],
            config["sizes"],
            float(config["end"]),
            float(config["launched"]),
            store,
            report if rank == 0 else None,
        )
    except Exception as exc:  # a worker's last word, read by the launcher (one line)
        message = " ".join(str(exc).split())[:300] or type(exc).__name__
        (work / f"rank{rank}.error").write_text(f"{type(exc).__name__}: {message}\n", encoding="utf-8")
        return 1
    if result is not None:
        text = result.model_dump_json()
        tmp = work / "result.json.tmp"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(work / "result.json")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))


__all__ = ["OPS", "CommBenchResult", "CommRecord", "prepare", "run", "save_best", "under_torchrun"]
