"""Pictures of results (optional extra ``plot``: matplotlib, imported only when a picture is asked for)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from napkin.errors import UsageError
from napkin.io.files import write_atomic
from napkin.units import format_number

if TYPE_CHECKING:
    from napkin.engines.planner import PlanResult
    from napkin.engines.serve_plan import ServePlanResult


def _pyplot() -> Any:
    """matplotlib's pyplot on the SVG backend, or a UsageError naming the extra to install."""
    try:
        import matplotlib

        matplotlib.use("svg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise UsageError(
            "plot: drawing needs matplotlib, in napkin's 'plot' extra: pip install 'napkin-math[plot]'", field="plot"
        ) from None
    return plt


def plan_svg(result: PlanResult) -> str:
    """Every fitting layout as step time against per-GPU memory; the winner marked, the memory limit drawn."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        if result.points:
            mem, secs = zip(*result.points, strict=True)
            ax.scatter([m / 1e9 for m in mem], secs, s=8, alpha=0.35, color="tab:blue", label="fitting layouts")
        if result.layouts:
            best = result.layouts[0]
            ax.scatter(
                [best.per_gpu_bytes / 1e9],
                [best.step_seconds],
                s=90,
                marker="*",
                color="tab:red",
                label=f"#1 {best.layout_text} (MFU {best.mfu:.3f})",
                zorder=3,
            )
        ax.axvline(
            result.memory_limit / 1e9,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"memory limit {result.memory_limit / 1e9:.0f} GB",
        )
        ax.set_xlabel("memory per GPU (GB)")
        ax.set_ylabel("predicted step time (s)")
        ax.set_yscale("log")
        ax.set_title(f"{result.model} on {result.gpus:,} GPUs ({result.cluster}): {result.fitting:,} layouts fit")
        ax.legend(fontsize=7, loc="upper right")
        return _svg(fig)
    finally:
        plt.close(fig)


def write_plan_svg(result: PlanResult, path: Path, *, overwrite: bool = False) -> None:
    """``plan_svg`` written atomically to ``path``; an existing file is kept unless ``overwrite``."""
    _write_svg(path, plan_svg, result, overwrite)


def serve_plan_svg(result: ServePlanResult) -> str:
    """Every simulated deployment as $/1M output tokens against TPOT; the cheapest-for-latency frontier drawn."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    try:
        points = sorted(result.points)
        if points:
            ax.scatter([p[0] for p in points], [p[1] * 1e3 for p in points], s=14, alpha=0.5, label="deployments")
            frontier, best = [], float("inf")
            for usd, tpot, _ in points:  # cheapest first: keep each point faster than every cheaper one
                if tpot < best:
                    frontier.append((usd, tpot))
                    best = tpot
            ax.step(
                [f[0] for f in frontier],
                [f[1] * 1e3 for f in frontier],
                where="post",
                color="tab:red",
                label="cost–latency frontier",
            )
        ax.set_xlabel("USD per 1M output tokens (at the target rate)")
        ax.set_ylabel("TPOT at the SLO percentile (ms)")
        ax.set_title(f"{result.model} at {format_number(result.rate)} req/s: {len(points)} deployments meet the SLO")
        ax.legend(fontsize=7, loc="upper right")
        return _svg(fig)
    finally:
        plt.close(fig)


def write_serve_plan_svg(result: ServePlanResult, path: Path, *, overwrite: bool = False) -> None:
    """``serve_plan_svg`` written atomically to ``path``; an existing file is kept unless ``overwrite``."""
    _write_svg(path, serve_plan_svg, result, overwrite)


def _write_svg(path: Path, draw: Any, result: Any, overwrite: bool) -> None:
    if path.suffix.lower() != ".svg":
        raise UsageError(f"plot: {str(path)!r} must end in .svg", field="plot")
    write_atomic(path, draw(result), overwrite=overwrite)


def _svg(fig: Any) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    return buffer.getvalue()
