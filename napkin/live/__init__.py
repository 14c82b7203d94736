"""Live checks, the only code that imports torch (lazily): matmul and memory benchmarks (``bench``),
collective benchmarks (``bench_comm``) and torch's own measurements against napkin's formulas
(``verify``).
"""
