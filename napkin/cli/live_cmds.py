"""Live checks with torch: ``napkin bench matmul`` and ``napkin verify`` (torch imported lazily)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from napkin import units
from napkin.cli.common import (
    HardwareFileOpt,
    HardwareOpt,
    JsonOpt,
    boundary,
    emit,
    fail,
    load_hardware,
    note,
    progress,
    warn,
)
from napkin.errors import UsageError
from napkin.units import format_duration, format_rate

app = typer.Typer()
bench_app = typer.Typer(
    help="Measure what the hardware delivers (needs the 'bench' extra: torch).", no_args_is_help=True
)


class Device(StrEnum):
    auto = "auto"
    cuda = "cuda"
    cpu = "cpu"
    mps = "mps"


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
    from napkin.live import bench

    with boundary():
        dtypes = [d.strip() for d in dtype.split(",") if d.strip()]
        size_list = bench.parse_sizes(sizes)
        extra = bench.parse_shapes(shape or [])
        seconds = units.parse_duration(budget, "--budget")
        torch = bench.import_torch()
        dev = bench.pick_device(torch, device.value)
        name = bench.device_name(torch, dev)
        profile = _profile(hardware, hardware_file, dev, name)
        if save:  # everything --save needs, checked before the benchmark runs
            _can_save(profile, name, force)

        def peak(d: str) -> float | None:
            if profile is None:
                return None
            found: float | None = profile.peak_if_known(d)
            return found

        with progress("matmul") as update:
            result = bench.run(
                device=dev,
                dtypes=dtypes,
                sizes=size_list,
                shapes=extra,
                budget=seconds,
                peak=peak,
                hardware=profile.name if profile else None,
                progress=update,
            )

    emit(result, as_json)  # the measured numbers first: a failed save cannot lose them
    if save and result.best:
        with boundary():
            _save(result, profile, name, force)
    if not result.best:
        fail(
            f"nothing measured within the {format_duration(seconds)} budget (see the reasons above); "
            "raise --budget or pass smaller --sizes",
            1,
        )


def _profile(hardware: str | None, hardware_file: Any, device: str, name: str) -> Any:
    """The profile to compare with: the one asked for, else the one listing the device torch reports."""
    if hardware is not None or hardware_file is not None:
        return load_hardware(hardware, hardware_file).profile
    if device == "cpu":
        return None
    from napkin.systems.profiles import find_by_device

    loaded = find_by_device(name)
    if loaded is None:
        warn(f"no profile lists the device {name!r}; pass --hardware NAME to compare with a datasheet figure")
    return loaded.profile if loaded is not None else None


def _can_save(profile: Any, name: str, force: bool) -> None:
    """Refuse ``--save`` before measuring when it could not be kept: no profile, another device, or a
    measurements file that cannot be read (it would be rewritten)."""
    from napkin.systems.measurements import check_device, load_all

    if profile is None:
        raise UsageError(
            f"--save: no hardware profile for {name!r}; pass --hardware NAME "
            "(for example one made with 'napkin hardware new my-gpu --from h100')"
        )
    check_device(profile.name, profile.device_names, name, force=force)
    load_all()


def _save(result: Any, profile: Any, name: str, force: bool) -> None:
    from napkin.live.bench import save_best

    path = save_best(result, profile, force=force)
    for dtype, rec in result.best.items():
        note(f"saved {dtype} {format_rate(rec.flops_per_second)} for {profile.name} in {path}")
    if path is None:
        warn("nothing to save: no size finished")


@bench_app.command("memory")
def bench_memory(
    device: Annotated[Device, typer.Option("--device", help="auto picks CUDA, then MPS, then CPU.")] = Device.auto,
    size: Annotated[str, typer.Option("--size", metavar="BYTES", help="Bytes per array (three arrays).")] = "1GiB",
    repeats: Annotated[str, typer.Option("--repeats", metavar="INT", help="Timed runs per kernel.")] = "10",
    hardware: HardwareOpt = None,
    hardware_file: HardwareFileOpt = None,
    save: Annotated[
        bool, typer.Option("--save", help="Keep the best bandwidth for this hardware (--bandwidth measured).")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="With --save: keep it even if the profile does not list this device.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Time STREAM copy and triad and compare the achieved bandwidth with the profile's datasheet figure."""
    from napkin.live import bench, bench_memory

    with boundary():
        array = units.parse_bytes(size, "--size")
        runs = units.parse_int(repeats, "--repeats")
        if runs < 1:
            raise UsageError(f"--repeats: {repeats!r} must be at least 1")
        torch = bench.import_torch()
        dev = bench.pick_device(torch, device.value)
        name = bench.device_name(torch, dev)
        profile = _profile(hardware, hardware_file, dev, name)
        with progress("memory") as update:
            result = bench_memory.measure(dev, array, runs, profile, update)
        if save:
            if profile is None:
                raise UsageError(f"--save: no hardware profile for {name!r}; pass --hardware NAME")
            path = bench_memory.save(result, profile, force=force)
            note(
                f"saved {result.best_bytes_per_second / 1e9:,.1f} GB/s ({result.best_kernel}) for {profile.name} "
                f"in {path}"
            )
    emit(result, as_json)


@app.command("verify")
def verify_command(
    device: Annotated[Device, typer.Option("--device", help="Where to run the checks.")] = Device.cpu,
    as_json: JsonOpt = False,
) -> None:
    """Check napkin's formulas against torch: FLOPs, optimizer memory, dtypes, activations, KV cache."""
    from napkin.live import verify

    with boundary():
        result = verify.run(device.value)

    emit(result, as_json)
    if result.failed:
        raise typer.Exit(1)


__all__ = ["app", "bench_app"]
