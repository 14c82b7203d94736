"""The built wheel carries the profiles and presets, and a non-editable install finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_data_and_a_non_editable_install_uses_it(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("napkin_math-*.whl")  # distribution napkin-math, import napkin
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {n for n in names if n.startswith("napkin/hardware/")}
    assert {f"napkin/hardware/{p.name}" for p in (ROOT / "hardware").iterdir()} == shipped
    clusters = {n for n in names if n.startswith("napkin/clusters/")}
    assert {f"napkin/clusters/{p.name}" for p in (ROOT / "clusters").iterdir()} == clusters
    assert {"napkin/data/models.yaml", "napkin/py.typed", "napkin/cli/__init__.py"} <= names
    assert not any(n.startswith(("tests/", "hardware/", "clusters/")) for n in names)

    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    env = {**os.environ, "PYTHONPATH": str(site), "NAPKIN_CONFIG_DIR": str(tmp_path / "cfg")}
    probe = (
        "import napkin, napkin.systems.profiles as p; from napkin.cli import main; import sys;"
        "import napkin.systems.cluster as c; print(napkin.__file__); print(p.builtin_dir()); print(c.builtin_dir()); sys.argv=['napkin','train-time','-N','70e9','-D','15e12',"
        "'-G','1024','--json']; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith(str(site)) and lines[1] == str(site / "napkin" / "hardware")
    assert lines[2] == str(site / "napkin" / "clusters")
    assert '"days": 143.92' in out.stdout
