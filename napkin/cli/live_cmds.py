"""Live checks with torch: ``napkin bench matmul`` and ``napkin verify`` (torch imported lazily)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from napkin import units
from napkin.cli.common import HardwareFileOpt, HardwareOpt, JsonOpt, boundary, emit, fail, load_hardware, note, warn
from napkin.errors import UsageError
from napkin.units import format_duration, format_percent, format_rate

app = typer.Typer()
bench_app = typer.Typer(help="Measure what the hardware delivers (needs the 'bench' extra: torch).",
                        no_args_is_help=True)  # fmt: skip


class Device(StrEnum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"
    mps = "mps"


def _int_list(text: str, flag: str) -> list[int]:
    return [units.parse_int(part, flag) for part in text.split(",") if part.strip()]


def _shapes(texts: list[str]) -> list[tuple[int, int, int]]:
    shapes = []
    for text in texts:
        parts = [p for p in text.replace("×", "x").lower().split("x") if p.strip()]
        if len(parts) != 3:
            raise UsageError(f"--shape: {text!r} must be MxKxN, e.g. 4096x4096x14336")
        m, k, n = (units.parse_int(p, "--shape") for p in parts)
        shapes.append((m, k, n))
    return shapes


@bench_app.command("matmul")
def bench_matmul(
    device: Annotated[Device, typer.Option("--device", help="auto picks CUDA, then MPS, then CPU.")] = Device.auto,
    dtype: Annotated[
        str,
        typer.Option(
            "--dtype",
            metavar="DTYPE,…",
            help="Comma-separated subset of bf16,fp16,fp32,tf32,fp8 (unsupported ones are skipped with the reason).",
        ),
    ] = "bf16,fp16,fp32,tf32,fp8",
    sizes: Annotated[
        str, typer.Option("--sizes", metavar="N,N,…", help="Square sizes, comma-separated.")
    ] = "1024,2048,4096,8192",
    shape: Annotated[
        list[str] | None, typer.Option("--shape", metavar="MxKxN", help="Extra MxKxN shapes (repeatable).")
    ] = None,
    budget: Annotated[str, typer.Option("--budget", metavar="SECONDS", help="Time budget in seconds.")] = "30",
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    save: Annotated[bool, typer.Option("--save", help="Keep the best FLOP/s per dtype for this hardware.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="With --save: keep it even if the profile does not list this device.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Time matmuls and compare the achieved FLOP/s with the profile's dense peak."""
    from napkin import bench

    with boundary():
        dtypes = [d.strip() for d in dtype.split(",") if d.strip()]
        size_list = _int_list(sizes, "--sizes")
        extra = _shapes(shape or [])
        seconds = units.parse_duration(budget, "--budget")
        torch = bench.import_torch()
        dev = bench.pick_device(torch, device.value)
        name = bench.device_name(torch, dev)
        loaded = None
        if hardware is not None or hardware_file is not None:
            loaded = load_hardware(hardware, hardware_file)
        elif dev != "cpu":
            from napkin.profiles import find_by_device

            loaded = find_by_device(name)
            if loaded is None:
                warn(f"no profile lists the device {name!r}; pass --hardware NAME to compare with a peak")
        profile = loaded.profile if loaded is not None else None

        def peak(d: str) -> float | None:
            if profile is None:
                return None
            return profile.peak_if_known(d)

        from rich.progress import Progress

        with Progress(transient=True, console=_stderr_console()) as bar:
            task = bar.add_task("matmul", total=1.0)
            result = bench.run(
                device=dev,
                dtypes=dtypes,
                sizes=size_list,
                shapes=extra,
                budget=seconds,
                peak=peak,
                hardware=profile.name if profile else None,
                progress=lambda label, done: bar.update(task, completed=done, description=label),
            )
        if save:
            _save(result, profile, name, force)

    def render() -> list[Any]:
        from rich.text import Text

        from napkin import render as r

        def shape(rec: Any) -> str:
            return f"{rec.m}³" if rec.m == rec.k == rec.n else f"{rec.m}×{rec.k}×{rec.n}"

        rows = [[rec.dtype, shape(rec), format_rate(rec.flops_per_second or 0),
                 format_rate(rec.peak_flops) if rec.peak_flops else "–",
                 format_percent(rec.fraction_of_peak) if rec.fraction_of_peak is not None else "–",
                 format_duration(rec.seconds or 0)] for rec in result.records if rec.status == "ok"]  # fmt: skip
        skipped: dict[str, list[Any]] = {}
        for rec in result.records:
            if rec.status != "ok":
                skipped.setdefault(rec.dtype, []).append(rec)
        notes = [f"{d} {', '.join(shape(x) for x in recs)}: {recs[0].reason}" for d, recs in skipped.items()]
        title = f"Matmul benchmark: {result.device_name} ({result.device}, torch {result.torch_version})"
        best = ", ".join(f"{d} {format_rate(b.flops_per_second or 0)} at {shape(b)}" for d, b in result.best.items())
        lines = [f"best: {best or 'none'}", *(["not measured:"] if notes else []), *(f"- {n}" for n in notes),
                 "median over repeats, inputs rotated, result checked against float64"]  # fmt: skip
        table = r.grid(title, ["dtype", "M×K×N", "achieved", "dense peak", "of peak", "median"], rows, align="llrrrr")
        return [table, Text("\n".join(lines))]

    records = [rec.model_dump(mode="json") for rec in result.records]  # --json: one record per (size, dtype)
    emit(result, as_json, render, warnings=result.warnings, json_data=records)
    if not result.best:
        fail(f"nothing measured within the {format_duration(seconds)} budget (see the reasons above); "
             "raise --budget or pass smaller --sizes", 1)  # fmt: skip


def _stderr_console() -> Any:
    from napkin import render as r

    return r.console(stderr=True)


def _save(result: Any, profile: Any, name: str, force: bool) -> None:
    from napkin.bench import save_best

    if profile is None:
        raise UsageError(f"--save: no hardware profile for {name!r}; pass --hardware NAME "
                         "(for example one made with 'napkin hardware new my-gpu --from h100')")  # fmt: skip
    path = save_best(result, profile, force=force)
    for dtype, rec in result.best.items():
        note(f"saved {dtype} {format_rate(rec.flops_per_second)} for {profile.name} in {path}")
    if path is None:
        warn("nothing to save: no size finished")


@app.command("verify")
def verify_command(
    device: Annotated[Device, typer.Option("--device", help="Where to run the checks.")] = Device.cpu,
    as_json: JsonOpt = False,
) -> None:
    """Check napkin's formulas against torch: FLOPs, optimizer memory, dtypes, activations, KV cache."""
    from napkin import verify

    with boundary():
        result = verify.run(device.value)

    def render() -> list[Any]:
        from napkin import render as r

        def g(x: float) -> str:
            return r.number(x)

        rows = [[c.category, c.name, g(c.expected), g(c.measured), "pass" if c.ok else "FAIL", c.detail]
                for c in result.checks]  # fmt: skip
        return [r.grid(f"napkin verify ({result.device}, torch {result.torch_version})",
                       ["area", "check", "napkin", "torch", "", "detail"], rows, align="llrrll", secondary=(5,),
                       caption=f"{result.passed} passed, {result.failed} failed")]  # fmt: skip

    emit(result, as_json, render)
    if result.failed:
        raise typer.Exit(1)


__all__ = ["app", "bench_app"]
