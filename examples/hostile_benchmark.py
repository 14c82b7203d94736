"""Time costs that must grow linearly (issue 10): the number parser, and profile discovery.

    python examples/hostile_benchmark.py [--profiles 5000]

1. ``units.parse_count`` on inputs of 10 B … 1 MB: every one is refused (too long) or parsed, in time
   proportional to its length (before: 7.6 s for 60 KB, a 1 MB value never finished).
2. ``napkin hardware list`` and a name lookup with N user profiles in one directory (before: 15 s for
   5,000 profiles); with N and N/4 profiles the ratio of times should be near 4, not 16.

Prints each timing; exits 1 if a ratio shows super-linear growth (generous bounds: this is a
benchmark, not a test, and a loaded machine is noisy).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from napkin import units
from napkin.errors import UsageError

PROFILE = """name: box{i}
display_name: Box {i}
vendor: Test
aliases: [b{i}]
memory: 80 GB
memory_bandwidth: 3 TB/s
peak_flops: {{bf16: 100 TFLOP/s}}
sources: [{{title: benchmark fixture, url: 'https://example.com/'}}]
"""


def time_parse(text: str, repeats: int = 20) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        with contextlib.suppress(UsageError):
            units.parse_count(text, "--params")
    return (time.perf_counter() - start) / repeats


def parse_scaling() -> bool:
    print("number parser (worst-case shapes: digits, spaces, then a letter)")
    ok = True
    shapes = {
        "digits": ("", "1", ""),
        "spaces": ("1", " ", "x"),
        "underscores": ("1", "_", "x"),
        "exponent": ("1e", "9", ""),
    }
    for label, (head, body, tail) in shapes.items():
        times = {n: time_parse(head + body * n + tail) for n in (10, 100, 60_000, 1_000_000)}
        print("  " + label.ljust(12) + "  ".join(f"{n:>9,} chars {t * 1e6:9.1f} µs" for n, t in times.items()))
        if times[1_000_000] > 0.05:  # 50 ms for 1 MB: anything super-linear would take seconds
            ok = False
    return ok


def catalog_scaling(count: int) -> bool:
    print("profile discovery with N user profiles (hardware list; train-time -H box0)")
    results = {}
    for n in (count // 4, count):
        with tempfile.TemporaryDirectory() as tmp:
            hardware = Path(tmp) / "hardware"
            hardware.mkdir()
            for i in range(n):
                (hardware / f"box{i}.yaml").write_text(PROFILE.format(i=i))
            env = {**os.environ, "NAPKIN_CONFIG_DIR": tmp, "COLUMNS": "200"}
            timings = []
            lookup = ["train-time", "-N", "7B", "-D", "1T", "-G", "8", "-H", "box0"]
            for argv in (["hardware", "list", "--json"], lookup):
                start = time.perf_counter()
                command = [sys.executable, "-m", "napkin", *argv]
                done = subprocess.run(command, env=env, capture_output=True, check=False)
                timings.append(time.perf_counter() - start)
                if done.returncode != 0:
                    print(done.stderr.decode())
                    return False
            results[n] = timings
            print(f"  N = {n:>6,}: list {timings[0]:6.2f} s, lookup {timings[1]:6.2f} s")
    small, large = results[count // 4], results[count]
    ratios = [b / a for a, b in zip(small, large, strict=True)]
    print(f"  ratio for 4x the profiles: list {ratios[0]:.1f}x, lookup {ratios[1]:.1f}x (linear: about 4x or less)")
    return all(r < 8 for r in ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=int, default=5000)
    args = parser.parse_args()
    ok = parse_scaling() & catalog_scaling(args.profiles)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
