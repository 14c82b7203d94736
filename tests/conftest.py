"""Every test runs with its own config directory and deterministic output (llm's autouse pattern)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from typer.testing import CliRunner, Result

from napkin.cli import _app_for
from napkin.systems import profiles

# No per-example deadline: the first example of a test may build pydantic validators (deferred at
# import), and a 2-core CI machine under load must not turn that into a flaky failure. Under CI
# (CI=true) the examples are derandomized, so a run's verdict depends on the code alone; a developer's
# runs draw new examples each time and keep finding cases.
settings.register_profile("napkin", deadline=None, derandomize=os.environ.get("CI") == "true")
settings.load_profile("napkin")

# torch without numpy warns at import ("Failed to initialize NumPy"), which filterwarnings=error would
# turn into a half-imported torch: the torch tests need the whole 'bench' extra, torch and numpy.
HAS_TORCH = all(importlib.util.find_spec(name) is not None for name in ("torch", "numpy"))
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="needs the optional 'bench' extra (torch and numpy)")


def _cgroup_cpus() -> int | None:
    """The CPUs a cgroup CPU quota allows this process (v2 ``cpu.max``, v1 ``cfs_quota_us``), or None."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else max(1, int(quota) // int(period))
    except (OSError, ValueError):
        pass
    try:
        quota_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period_us = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota_us <= 0 else max(1, quota_us // period_us)
    except (OSError, ValueError):
        return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per CPU this process may run on (its affinity and any cgroup
    quota, not the host's core count, which a container can exceed many times over), at most 8."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(cores, quota or cores, 8))


def builtin(name: str) -> profiles.HardwareProfile:
    """A built-in profile, whatever the environment says (tests' module-level constants use this: they are
    read before the isolation fixture runs, so a user's NAPKIN_HARDWARE_PATH must not reach them)."""
    return profiles.find(name, [("built-in", profiles.builtin_dir())]).profile


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """napkin never sees the real home directory, and rich renders the same everywhere."""
    config = tmp_path / "config"
    monkeypatch.setenv("NAPKIN_CONFIG_DIR", str(config))
    monkeypatch.delenv("NAPKIN_HARDWARE_PATH", raising=False)
    monkeypatch.delenv("NAPKIN_HARDWARE", raising=False)
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    yield config


class Run:
    """Invoke the CLI in-process and keep stdout, stderr and the exit code apart."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, input: str | None = None) -> Result:
        # the app as ``napkin`` builds it for these arguments (``_app_for``: the command being run alone, the whole
        # app for a bare ``napkin``, --help or a name it does not know), not the whole app every time: typer converts
        # every command's signature on each invoke, which had been most of the suite's CLI time
        return self.runner.invoke(_app_for(list(args)), list(args), input=input)


@pytest.fixture
def napkin() -> Run:
    return Run()
