"""Live checks with torch: ``napkin bench matmul`` and ``napkin verify`` (torch imported lazily)."""

from __future__ import annotations

import typer

app = typer.Typer()
bench_app = typer.Typer(help="Measure what the hardware delivers (needs the 'bench' extra: torch).",
                        no_args_is_help=True)  # fmt: skip
