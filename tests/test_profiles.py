"""Hardware profiles: every built-in validates and matches its datasheet; lookup order; errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napkin.errors import ProfileError, UsageError
from napkin.systems import profiles

BUILTIN = Path(__file__).resolve().parent.parent / "hardware"

# Dense peaks (FLOP/s), memory (B) and bandwidth (B/s) as the vendors' datasheets give them; where a
# datasheet quotes 2:4 sparsity the dense figure is half. Sources are in each YAML file.
DATASHEET = {
    "h100-sxm": {
        "bf16": 989.5e12,
        "fp16": 989.5e12,
        "fp8": 1979e12,
        "tf32": 494.5e12,
        "fp32": 67e12,
        "memory": 80e9,
        "bw": 3.35e12,
    },
    "h100-pcie": {"bf16": 756.5e12, "fp8": 1513e12, "memory": 80e9, "bw": 2e12},
    "h100-nvl": {"bf16": 835.5e12, "fp8": 1670.5e12, "memory": 94e9, "bw": 3.9e12},
    "h200-sxm": {"bf16": 989.5e12, "fp8": 1979e12, "memory": 141e9, "bw": 4.8e12},
    "a100-sxm-40gb": {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12, "memory": 40e9, "bw": 1555e9},
    "a100-sxm-80gb": {"bf16": 312e12, "fp16": 312e12, "memory": 80e9, "bw": 2039e9},
    "a100-pcie-80gb": {"bf16": 312e12, "memory": 80e9, "bw": 1935e9},
    "v100-sxm2-32gb": {"fp16": 125e12, "fp32": 15.7e12, "memory": 32e9, "bw": 900e9},
    "b200": {"bf16": 2.25e15, "fp8": 4.5e15, "fp4": 9e15, "memory": 180e9, "bw": 7.7e12},
    "l40s": {"bf16": 362.05e12, "fp8": 733e12, "memory": 48e9, "bw": 864e9},
    "l4": {"bf16": 121e12, "fp8": 242.5e12, "memory": 24e9, "bw": 300e9},
    "rtx-4090": {"bf16": 165.2e12, "fp8": 330.3e12, "memory": 24e9, "bw": 1008e9},
    "mi250x": {"bf16": 383e12, "fp32": 47.9e12, "memory": 128e9, "bw": 3.2768e12},
    "mi300x": {"bf16": 1307.4e12, "fp8": 2614.9e12, "memory": 192e9, "bw": 5.3e12},
    "mi325x": {"bf16": 1307.4e12, "fp8": 2614.9e12, "memory": 256e9, "bw": 6e12},
    "tpu-v4": {"bf16": 275e12, "memory": 32 * 2**30, "bw": 1200e9},
    "tpu-v5e": {"bf16": 197e12, "memory": 16e9, "bw": 819e9},
    "tpu-v5p": {"bf16": 459e12, "memory": 95e9, "bw": 2765e9},
    "gaudi3": {"bf16": 1835e12, "fp8": 1835e12, "memory": 128e9, "bw": 3.67e12},
    "h800-sxm": {"bf16": 989.5e12, "fp8": 1979e12, "fp64": 1e12, "memory": 80e9, "bw": 3.35e12},
    "gb200": {"bf16": 2.5e15, "fp8": 5e15, "fp4": 10e15, "memory": 186e9, "bw": 8e12},
    "mi355x": {"bf16": 2.5e15, "fp8": 5e15, "fp4": 10e15, "memory": 288e9, "bw": 8e12},
    "tpu-v6e": {"bf16": 918e12, "memory": 32e9, "bw": 1640e9},
    "trainium2": {"bf16": 667e12, "fp8": 1299e12, "memory": 96 * 2**30, "bw": 2.9e12},
}


def test_every_builtin_profile_validates_and_the_catalog_is_complete() -> None:
    catalog = profiles.load_catalog([("built-in", profiles.builtin_dir())])
    assert catalog.broken == []
    assert sorted(p.profile.name for p in catalog.profiles) == sorted(DATASHEET)


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_builtin_figures_match_the_datasheets(name: str) -> None:
    p = profiles.resolve(name).profile
    expected = DATASHEET[name]
    assert p.memory == pytest.approx(expected["memory"], rel=1e-12)
    assert p.memory_bandwidth == pytest.approx(expected["bw"], rel=1e-12)
    for dtype in set(expected) - {"memory", "bw"}:
        assert p.peak(dtype) == pytest.approx(expected[dtype], rel=1e-12), dtype
    assert p.sources and p.sources[0].url.startswith("https://")


def test_builtin_files_start_with_the_schema_line_and_the_schema_is_current() -> None:
    for path in sorted(BUILTIN.glob("*.yaml")):
        assert path.read_text().startswith("# yaml-language-server: $schema=schema.json\n"), path
    on_disk = json.loads((BUILTIN / "schema.json").read_text())
    assert on_disk == profiles.schema(), "regenerate hardware/schema.json with 'napkin hardware schema'"


def test_h100_is_the_default_and_dense() -> None:
    h100 = profiles.resolve().profile
    assert h100.name == "h100-sxm"
    assert h100.peak("bf16") == 989.5e12  # the 2:4-sparse headline 1,979 must never appear as bf16
    assert h100.ridge_point("bf16") == pytest.approx(295.4, abs=0.05)


@pytest.mark.parametrize("alias", ["h100", "H100-SXM", "h100_sxm5", "H100 SXM", "h100-80gb", "H100SXM"])
def test_names_are_case_and_punctuation_insensitive(alias: str) -> None:
    assert profiles.resolve(alias).profile.name == "h100-sxm"


def test_unknown_names_list_the_closest_first_and_never_fall_back() -> None:
    with pytest.raises(UsageError) as info:
        profiles.resolve("h10")
    message = str(info.value)
    assert message.startswith("hardware: unknown hardware 'h10'; closest: h100-sxm")  # the CLI says --hardware
    assert "tpu-v5p" in message and "napkin hardware new" in message
    with pytest.raises(UsageError, match="closest: mi300x"):
        profiles.resolve("mi300")


def test_missing_dtype_is_a_clear_error() -> None:
    with pytest.raises(UsageError, match="v100-sxm2-32gb has no bf16 peak; it has: fp64, fp32, fp16"):
        profiles.resolve("v100").profile.peak("bf16")


def _write(directory: Path, name: str, text: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.yaml"
    path.write_text(text)
    return path


def _profile_text(name: str, memory: str = "80 GB", aliases: str = "[]") -> str:
    return (
        f"name: {name}\ndisplay_name: Test {name}\nvendor: Test\naliases: {aliases}\nmemory: {memory}\n"
        "memory_bandwidth: 3 TB/s\npeak_flops:\n  bf16: 1 PFLOP/s\n"
        "sources:\n  - title: test fixture\n    url: https://example.com/\n"
    )


def test_lookup_order_explicit_file_then_env_then_user_then_builtin(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = isolated / "hardware"
    env1 = tmp_path / "env1"
    _write(user, "h100-sxm", _profile_text("h100-sxm", "1 TB", "[h100]"))
    loaded = profiles.resolve("h100")
    assert (loaded.profile.memory, loaded.origin) == (1e12, "user")
    # Replacing a built-in by its own name is allowed, and said: every command prints this note.
    assert loaded.notes == (f"h100-sxm → your profile at {user / 'h100-sxm.yaml'}, instead of the built-in h100-sxm",)
    _write(env1, "mine", _profile_text("env-box", "2 TB"))
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", str(env1))
    assert profiles.resolve("env-box").origin == "env"
    explicit = _write(tmp_path, "explicit", _profile_text("explicit", "4 TB"))
    assert profiles.resolve("h100", explicit).profile.memory == 4e12
    assert [origin for origin, _ in profiles.search_path()] == ["env", "user", "built-in"]


def test_two_user_files_with_one_name_are_an_error_naming_both(
    isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """issue 9: after 'cp my-gpu.yaml my-gpu-old.yaml' no copy wins silently."""
    user = isolated / "hardware"
    _write(user, "my-gpu", _profile_text("my-gpu", "1 TB"))
    _write(user, "my-gpu-old", _profile_text("my-gpu", "2 TB"))
    with pytest.raises(ProfileError) as info:
        profiles.resolve("my-gpu")
    assert str(user / "my-gpu.yaml") in str(info.value) and str(user / "my-gpu-old.yaml") in str(info.value)
    assert profiles.resolve("h100").profile.name == "h100-sxm"  # other names are unaffected
    env1 = tmp_path / "env1"
    _write(env1, "other", _profile_text("h100-sxm", "3 TB", "[h100]"))
    _write(user, "h100-sxm", _profile_text("h100-sxm", "1 TB", "[h100]"))
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", str(env1))
    with pytest.raises(ProfileError, match=r"other\.yaml.*h100-sxm\.yaml|h100-sxm\.yaml.*other\.yaml"):
        profiles.resolve("h100")


def test_a_user_alias_never_takes_over_a_builtin_name(isolated: Path) -> None:
    """issue 10: 'aliases: [h100]' in a user file made it the default H100 without a word."""
    _write(isolated / "hardware", "lab-box", _profile_text("lab-box", "1 TB", "[a100]"))
    with pytest.raises(ProfileError) as info:
        profiles.resolve("a100")
    assert "lab-box.yaml" in str(info.value) and "a100-sxm-80gb.yaml" in str(info.value)
    assert profiles.resolve("lab-box").profile.name == "lab-box"  # its own name still works
    assert any("'a100'" in c for c in profiles.load_catalog().conflicts)


def test_errors_name_the_file_the_line_and_the_field(tmp_path: Path) -> None:
    text = _profile_text("bad").replace("bf16: 1 PFLOP/s", "bf16: -5 TFLOP/s").replace("memory: 80 GB", "memroy: 8")
    path = _write(tmp_path, "bad", text)
    with pytest.raises(ProfileError) as info:
        profiles.load_file(path)
    problems = info.value.problems
    assert f"{path}:5: memroy: unknown field" in problems[-1] or any(f"{path}:5: memroy" in p for p in problems)
    assert any(p.startswith(f"{path}:8: peak_flops.bf16: ") and "must be positive" in p for p in problems)
    assert any(p.startswith(f"{path}:1: memory: Field required") for p in problems)


def test_physical_bounds_are_checked(tmp_path: Path) -> None:
    text = _profile_text("odd").replace("  bf16: 1 PFLOP/s", "  bf16: 10 TFLOP/s\n  fp32: 20 TFLOP/s")
    with pytest.raises(ProfileError, match=r"peak_flops.bf16 must be ≥ peak_flops.fp32"):
        profiles.load_file(_write(tmp_path, "odd", text))
    with pytest.raises(ProfileError, match="above 100 PFLOP/s"):
        profiles.load_file(_write(tmp_path, "big", _profile_text("big").replace("1 PFLOP/s", "1 EFLOP/s")))


def test_yaml_python_tags_are_rejected_not_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = _profile_text("evil") + f"notes: !!python/object/apply:os.system ['touch {marker}']\n"
    with pytest.raises(ProfileError, match=r"evil.yaml:12: not valid YAML \(safe subset\)"):
        profiles.load_file(_write(tmp_path, "evil", evil))
    assert not marker.exists()


def test_a_broken_user_profile_is_reported_only_when_used(isolated: Path) -> None:
    _write(isolated / "hardware", "broken", "name: broken\nmemory: lots\n")
    catalog = profiles.load_catalog()
    assert [Path(b.path).name for b in catalog.broken] == ["broken.yaml"]
    assert profiles.resolve("h100").profile.name == "h100-sxm"  # other profiles still work
    with pytest.raises(ProfileError, match=r"broken.yaml:2: memory: "):
        profiles.resolve("broken")


def test_bundled_profiles_are_read_as_traversables_from_a_zip(tmp_path: Path) -> None:
    """Loading never assumes a real directory: it works from a zipped package as well."""
    import zipfile

    archive = tmp_path / "bundle.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in BUILTIN.glob("*.yaml"):
            zf.write(path, f"hardware/{path.name}")
    root = zipfile.Path(archive) / "hardware"
    catalog = profiles.load_catalog([("built-in", root)])
    assert len(catalog.profiles) == len(DATASHEET) and not catalog.broken
    assert profiles.find("h100", [("built-in", root)]).path == "<built-in>/h100-sxm.yaml"
