"""``napkin hardware …`` as a user drives it: copy, edit with $EDITOR, validate, list, compare."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from napkin.systems.profiles import schema
from tests.conftest import Run


def fake_editor(tmp_path: Path, script: str) -> str:
    """An $EDITOR that runs a Python snippet on the file it is given (``path`` in the snippet)."""
    editor = tmp_path / "fake_editor.py"
    editor.write_text(f"import sys, re\npath = sys.argv[1]\ntext = open(path).read()\n{script}\n")
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    return f"{sys.executable} {editor}"


def _line_of(text: str, start: str) -> int:
    """1-based number of the line that starts with ``start`` (computed, so the test states no magic number)."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def test_list_shows_every_builtin_with_origin(napkin: Run) -> None:
    r = napkin("hardware", "list")
    assert r.exit_code == 0
    for name in ("h100-sxm", "a100-sxm-40gb", "mi300x", "tpu-v5p", "gaudi3", "rtx-4090"):
        assert name in r.stdout
    assert "989.5 TFLOP/s" in r.stdout and "built-in" in r.stdout
    data = json.loads(napkin("hardware", "list", "--json").stdout)
    assert len(data["profiles"]) == 24 and data["invalid"] == []


def test_show_and_compare(napkin: Run) -> None:
    r = napkin("hardware", "show", "h100")
    assert "NVIDIA H100 SXM5 80GB" in r.stdout and "80 GB (74.5 GiB)" in r.stdout and "datasheet" in r.stdout
    data = json.loads(napkin("hardware", "show", "H100_SXM5", "--json").stdout)
    assert data["peak_flops"]["bf16"] == 989.5e12 and data["origin"] == "built-in"
    r = napkin("hardware", "compare", "h100", "a100", "mi300x")
    assert r.exit_code == 0 and "ridge (bf16)" in r.stdout and "295 FLOP/B" in r.stdout and "153 FLOP/B" in r.stdout
    ridges = [p["ridge_point"] for p in json.loads(napkin("hardware", "compare", "h100", "a100", "--json").stdout)]
    assert ridges == pytest.approx([295.37, 153.02], abs=0.01)


def test_show_gives_the_host_link_activation_offload_uses(napkin: Run) -> None:
    """``host_link_bandwidth`` (each way: H100's PCIe Gen5 x16, 128 GB/s both ways in the datasheet) is shown with
    the other links; a profile without one says so."""
    lines = napkin("hardware", "show", "h100").stdout.splitlines()
    assert any(line.split()[:2] == ["host", "link"] and "64 GB/s each way" in line for line in lines)
    lines = napkin("hardware", "show", "b200").stdout.splitlines()
    assert any(line.split()[:2] == ["host", "link"] and "–" in line for line in lines)


def test_schema_command_matches_the_shipped_file(napkin: Run) -> None:
    printed = json.loads(napkin("hardware", "schema").stdout)
    assert printed == schema() == json.loads((Path(__file__).parent.parent / "hardware" / "schema.json").read_text())
    assert printed["additionalProperties"] is False


def test_path_lists_the_search_order(napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", "/tmp/a")
    lines = napkin("hardware", "path").stdout.splitlines()
    assert lines[1].split() == ["env", "/tmp/a"]
    assert lines[2].split() == ["user", str(isolated / "hardware")]
    assert lines[3].startswith("built-in")


def test_new_copies_and_never_clobbers(napkin: Run, isolated: Path) -> None:
    r = napkin("hardware", "new", "my-h100", "--from", "h100")
    target = isolated / "hardware" / "my-h100.yaml"
    assert r.exit_code == 0 and r.stdout.strip() == str(target)
    text = target.read_text()
    assert "name: my-h100\n" in text and "aliases: []\n" in text and "# Copied from the built-in profile" in text
    assert (isolated / "hardware" / "schema.json").exists()
    target.write_text(text + "# my note\n")
    again = napkin("hardware", "new", "my-h100", "--from", "a100")
    assert again.exit_code == 1 and "already exists; napkin does not overwrite it (use --force" in again.stderr
    assert target.read_text().endswith("# my note\n")
    assert napkin("hardware", "new", "my-h100", "--from", "a100", "--force").exit_code == 0
    assert "A100" in target.read_text()
    assert napkin("hardware", "new", "Bad Name").exit_code == 2


def test_user_edits_a_copy_and_max_model_uses_it(napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The acceptance flow: copy the H100 profile, change its memory in an editor, use it."""
    assert napkin("hardware", "new", "my-h100", "--from", "h100").exit_code == 0
    monkeypatch.setenv(
        "EDITOR", fake_editor(tmp_path, "open(path, 'w').write(text.replace('memory: 80 GB', 'memory: 160 GB'))")
    )
    r = napkin("hardware", "edit", "my-h100")
    assert r.exit_code == 0, r.stderr
    data = json.loads(napkin("max-model", "--gpus", "8", "--hardware", "my-h100", "--json").stdout)
    assert data["params"] == pytest.approx(80e9) and data["hardware"] == "my-h100"


def test_edit_keeps_the_last_good_version_and_the_draft(
    napkin: Run, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert napkin("hardware", "new", "box", "--from", "a100").exit_code == 0
    target = isolated / "hardware" / "box.yaml"
    good = target.read_text()
    monkeypatch.setenv(
        "EDITOR", fake_editor(tmp_path, "open(path, 'w').write(text.replace('memory_bandwidth:', 'memory_bandwith:'))")
    )
    r = napkin("hardware", "edit", "box")
    assert r.exit_code == 1
    draft = isolated / "hardware" / ".box.draft.yaml"
    line = _line_of(draft.read_text(), "memory_bandwith:")
    assert f"{draft}:{line}: memory_bandwith: unknown field" in r.stderr
    first_key = next(i for i, t in enumerate(draft.read_text().splitlines(), 1) if not t.startswith("#"))
    assert f"{draft}:{first_key}: memory_bandwidth: Field required" in r.stderr  # a missing field: the mapping's line
    assert "keeps its previous version" in r.stderr
    assert target.read_text() == good and "memory_bandwith" in draft.read_text()
    # the next edit reopens the draft; fixing it saves it and removes the draft
    monkeypatch.setenv(
        "EDITOR",
        fake_editor(
            tmp_path, "open(path, 'w').write(text.replace('bandwith', 'bandwidth').replace('2039 GB/s', '2000 GB/s'))"
        ),
    )
    r = napkin("hardware", "edit", "box")
    assert r.exit_code == 0 and "reopening your unsaved draft" in r.stderr
    assert "memory_bandwidth: 2000 GB/s" in target.read_text() and not draft.exists()


def test_edit_of_a_builtin_creates_an_overriding_copy(
    napkin: Run, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "EDITOR", fake_editor(tmp_path, "open(path, 'w').write(text.replace('power: 700 W', 'power: 650 W'))")
    )
    assert napkin("hardware", "edit", "h100").exit_code == 0
    shown = json.loads(napkin("hardware", "show", "h100", "--json").stdout)
    assert shown["power"] == 650 and shown["origin"] == "user" and "h100" in shown["aliases"]
    assert (Path(__file__).parent.parent / "hardware" / "h100-sxm.yaml").read_text().count("power: 700 W") == 1


def test_a_typo_gives_a_one_line_error_with_file_and_line(napkin: Run, isolated: Path) -> None:
    assert napkin("hardware", "new", "typo", "--from", "h100").exit_code == 0
    target = isolated / "hardware" / "typo.yaml"
    target.write_text(target.read_text().replace("  bf16: 989.5 TFLOP/s", "  bf16: 989.5 TFLOPZ"))
    r = napkin("max-model", "--hardware", "typo")
    assert r.exit_code == 1
    assert r.stderr.count("\n") == 1
    line = _line_of(target.read_text(), "  bf16: 989.5 TFLOPZ")
    assert r.stderr.startswith(f"napkin: error: {target}:{line}: peak_flops.bf16: unknown unit 'TFLOPZ'")
    assert napkin("max-model").exit_code == 0  # other profiles are unaffected
    listing = napkin("hardware", "list")
    assert listing.exit_code == 0 and "user (INVALID)" in listing.stdout and "invalid profile" in listing.stderr


def test_validate_reports_every_problem_and_exits_1(napkin: Run, tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text((Path(__file__).parent.parent / "hardware" / "l4.yaml").read_text())
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad\nmemory: 0 GB\n")
    r = napkin("hardware", "validate", str(good), str(bad))
    assert r.exit_code == 1
    assert f"ok  {good}" in r.stdout
    assert f"{bad}:1: name: use lower-case letters" in r.stderr
    assert f"{bad}:2: memory: '0 GB' must be positive" in r.stderr
    assert "problem(s) in 2 file(s)" in r.stderr
    assert napkin("hardware", "validate").exit_code == 0
    data = json.loads(napkin("hardware", "validate", str(good), "--json").stdout)
    assert data == {"valid": [str(good)], "problems": []}


def test_hardware_file_option_and_env_dirs(napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    example = Path(__file__).parent.parent / "examples" / "my-h100.yaml"
    data = json.loads(napkin("max-model", "--gpus", "8", "--hardware-file", str(example), "--json").stdout)
    assert data["hardware"] == "my-h100-cloud" and data["params"] == pytest.approx(8 * 80e9 * 0.9 / 16)
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", str(example.parent))
    shown = json.loads(napkin("hardware", "show", "my-h100-cloud", "--json").stdout)
    assert shown["origin"] == "env"


def test_a_foreign_schema_json_in_the_user_dir_is_never_overwritten(napkin: Run, isolated: Path) -> None:
    directory = isolated / "hardware"
    directory.mkdir(parents=True)
    mine = directory / "schema.json"
    mine.write_text('{"title": "my own schema"}\n')
    r = napkin("hardware", "new", "box", "--from", "l4")
    assert r.exit_code == 0 and "is not napkin's schema; left as it is" in r.stderr
    assert mine.read_text() == '{"title": "my own schema"}\n'
    stale = {"title": "napkin hardware profile", "properties": {}}
    mine.write_text(json.dumps(stale))
    assert napkin("hardware", "new", "box2", "--from", "l4").exit_code == 0
    assert json.loads(mine.read_text()) == schema()  # napkin's own, refreshed


def test_edit_changes_a_profile_from_napkin_hardware_path_in_place(
    napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    (team / "cluster.yaml").write_text((Path(__file__).parent.parent / "examples" / "my-h100.yaml").read_text())
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", str(team))
    monkeypatch.setenv("EDITOR", fake_editor(tmp_path, "open(path, 'w').write(text.replace('72 GB', '70 GB'))"))
    r = napkin("hardware", "edit", "my-h100-cloud")
    assert r.exit_code == 0 and r.stdout.strip() == str(team / "cluster.yaml")
    assert "memory: 70 GB" in (team / "cluster.yaml").read_text()
