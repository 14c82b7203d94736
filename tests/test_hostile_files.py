"""Hostile files, round three (issue 20): every file napkin reads, from every folder and path, goes through the
one safe reader; clusters and model presets follow the hardware catalog's rules for names."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.conftest import Run

ROOT = Path(__file__).resolve().parent.parent
DGX = (ROOT / "clusters" / "dgx-h100.yaml").read_text(encoding="utf-8")


def _special(kind: str, path: Path) -> None:
    """A file napkin must refuse to read: a FIFO (would hang), a folder, a link to /dev/zero (would grow without
    bound), bytes that are not UTF-8."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(b"name: \xff\xfe\n")


KINDS = ["fifo", "folder", "zero", "not-utf8"]


# Each reader: (where the file goes, the command, the exit status, a fragment of the one error line or note).
def _readers(tmp: Path, config: Path) -> dict[str, tuple[Path, list[str], int, str]]:
    given = tmp / "given.yaml"
    return {
        "cluster validate PATH": (given, ["cluster", "validate", str(given)], 1, "problem(s)"),
        "--cluster-file": (given, ["comm", "all-reduce", "--bytes", "1GB", "--cluster-file", str(given)], 2, "given"),
        "--hardware-file": (given, ["flops", "matmul", "8", "8", "8", "--hardware-file", str(given)], 2, "given"),
        "--model-config": (given, ["kv-cache", "--model-config", str(given), "--context", "8"], 2, "given"),
        "hardware validate PATH": (given, ["hardware", "validate", str(given)], 1, "problem(s)"),
        # from folders: skipped and reported, built-ins still answer
        "models folder": (config / "models" / "x.yaml", ["kv-cache", "--model", "llama3-8b"], 0, "skipped"),
        "clusters folder": (config / "clusters" / "x.yaml", ["cluster", "list"], 0, "x.yaml"),
        "hardware folder": (config / "hardware" / "x.yaml", ["hardware", "list"], 0, "x.yaml"),
    }


@hsettings(max_examples=16, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(KINDS), reader=st.sampled_from(sorted(_readers(Path(), Path()))))
def test_every_reader_refuses_special_files(
    napkin: Run, isolated: Path, tmp_path: Path, kind: str, reader: str
) -> None:
    """Whatever reads a file (a path given, a folder scanned), a FIFO, a folder, /dev/zero or non-UTF-8 bytes are
    one line naming the file, never a hang, a memory blow-up or a traceback."""
    work = tmp_path / f"{kind}-{reader.replace(' ', '_').replace('/', '')}"
    work.mkdir()
    config = isolated
    where, argv, code, fragment = _readers(work, config)[reader]
    where.parent.mkdir(parents=True, exist_ok=True)
    if where.exists() or where.is_symlink():
        return  # hypothesis drew this pair already in this test's directory
    _special(kind, where)
    r = napkin(*argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == code, r.stderr
    assert "Traceback" not in r.stderr
    assert fragment in r.stderr, r.stderr


def test_a_stray_file_in_the_models_folder_is_skipped_and_reported(napkin: Run, isolated: Path) -> None:
    models = isolated / "models"
    models.mkdir(parents=True)
    (models / "broken.yaml").write_text(": : [\n")
    (models / "nameless.yaml").write_text("null:\n  description: x\n")
    (models / "huge.yaml").write_text("big:\n  model:\n    layers: " + "9" * 5000 + "\n")
    r = napkin("kv-cache", "--model", "llama3-8b")
    assert r.exit_code == 0
    assert "skipped" in r.stderr and "broken.yaml:1" in r.stderr
    assert "nameless.yaml:1: 'None' is not a preset name" in r.stderr
    assert "huge.yaml:3: a number of 5000 characters is longer than napkin reads (100)" in r.stderr
    listed = napkin("models")
    assert listed.exit_code == 0 and "llama3-8b" in listed.stdout and "warning: model presets: skipped" in listed.stderr


def test_a_preset_name_given_twice_is_an_error_only_for_that_name(napkin: Run, isolated: Path) -> None:
    models = isolated / "models"
    models.mkdir(parents=True)
    preset = "  description: x\n  source: x\n  published_params: 1\n  seq: 128\n  model: {layers: 2, hidden: 64}\n"
    (models / "a.yaml").write_text("mine:\n" + preset + "llama3-8b:\n" + preset)
    clash = napkin("kv-cache", "--model", "llama3-8b")
    assert clash.exit_code == 1 and "given by both <built-in>/models.yaml and" in clash.stderr
    other = napkin("kv-cache", "--model", "mine", "--context", "8")  # the same file's other preset still answers
    assert other.exit_code == 0, other.stderr


def _cluster(name: str, aliases: str = "[]", device: str | None = None) -> str:
    text = DGX.replace("name: dgx-h100\n", f"name: {name}\n", 1)
    text = "\n".join(f"aliases: {aliases}" if line.startswith("aliases:") else line for line in text.splitlines())
    return text.replace("device: h100-sxm", f"device: {device}") if device else text


def test_two_cluster_files_with_one_name_are_an_error_naming_both(
    napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for folder in (first, second):
        folder.mkdir()
        (folder / "c.yaml").write_text(_cluster("twin"))
    monkeypatch.setenv("NAPKIN_CLUSTER_PATH", f"{first}{os.pathsep}{second}")
    r = napkin("cluster", "show", "twin")
    assert r.exit_code == 1
    assert str(first / "c.yaml") in r.stderr and str(second / "c.yaml") in r.stderr


def test_a_user_alias_never_answers_a_builtin_name(napkin: Run, isolated: Path) -> None:
    (isolated / "clusters").mkdir(parents=True)
    (isolated / "clusters" / "mine.yaml").write_text(_cluster("mine", "[hgx-h100]"))
    r = napkin("cluster", "show", "hgx-h100")
    assert (
        r.exit_code == 1
        and "claimed by your profile 'mine'" in r.stderr
        and "the built-in profile 'dgx-h100'" in r.stderr
    )


def test_a_user_cluster_never_becomes_the_default_cluster(napkin: Run, isolated: Path) -> None:
    """The default cluster of --hardware h100 is the built-in made of it, not a user file that sorts first."""
    (isolated / "clusters").mkdir(parents=True)
    (isolated / "clusters" / "aaa.yaml").write_text(_cluster("aaa"))
    r = napkin("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--hardware", "h100", "--json")
    assert r.exit_code == 0 and '"cluster": "dgx-h100"' in r.stdout


def test_a_user_cluster_replacing_a_builtin_says_so(napkin: Run, isolated: Path) -> None:
    made = napkin("cluster", "new", "dgx-h100", "--force")
    assert made.exit_code == 0, made.stderr
    r = napkin("comm", "all-reduce", "--bytes", "1GB", "--cluster", "dgx-h100")
    assert r.exit_code == 0 and "dgx-h100 → your profile at" in r.stderr


def test_cluster_new_refuses_a_builtin_name_without_force(napkin: Run, isolated: Path) -> None:
    r = napkin("cluster", "new", "dgx-h100")
    assert r.exit_code == 2 and "is the built-in cluster dgx-h100's name" in r.stderr
    assert not (isolated / "clusters" / "dgx-h100.yaml").exists()


@pytest.mark.parametrize(
    "edit",
    [
        lambda text: text.replace("aliases: [dgxh100, hgx-h100]", "aliases:\n  - one-alias\n  - two-alias"),
        lambda text: text.replace("name: dgx-h100\n", '"name": dgx-h100\n', 1),
        lambda text: text.replace("name: dgx-h100\n", "name: 'dgx-h100'  # quoted, with a comment\n", 1),
    ],
    ids=["block-aliases", "quoted-key", "quoted-value"],
)
def test_cluster_new_renames_structurally(
    napkin: Run, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[str], str]
) -> None:
    source = tmp_path / "src"
    source.mkdir()
    (source / "dgx-h100.yaml").write_text(edit(DGX).replace("dgx-h100", "my-source"))
    monkeypatch.setenv("NAPKIN_CLUSTER_PATH", str(source))
    made = napkin("cluster", "new", "copy", "--from", "my-source")
    assert made.exit_code == 0, made.stderr
    shown = napkin("cluster", "show", "copy", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert '"name": "copy"' in shown.stdout and '"aliases": []' in shown.stdout
    assert "# " in (isolated / "clusters" / "copy.yaml").read_text()  # comments kept


def test_a_cluster_naming_a_missing_device_fails_validation_and_names_itself(
    napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "c"
    folder.mkdir()
    (folder / "ghost.yaml").write_text(_cluster("ghost", device="no-such-gpu"))
    checked = napkin("cluster", "validate", str(folder / "ghost.yaml"))
    assert checked.exit_code == 1 and "ghost.yaml: device: unknown hardware 'no-such-gpu'" in checked.stderr
    monkeypatch.setenv("NAPKIN_CLUSTER_PATH", str(folder))
    used = napkin("step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--cluster", "ghost")
    assert used.exit_code == 2 and "ghost.yaml: device: unknown hardware" in used.stderr
    assert "--hardware" not in used.stderr  # the user gave no --hardware


@pytest.mark.parametrize("command", [["hardware", "edit", "h100"], ["cluster", "edit", "dgx-h100"]])
def test_edit_without_an_editor_or_a_terminal_refuses_before_writing(
    napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.delenv("EDITOR", raising=False)
    monkeypatch.delenv("VISUAL", raising=False)
    r = napkin(*command)  # CliRunner's stdin is no terminal
    assert r.exit_code == 2 and "$EDITOR: not set, and there is no terminal to run vi in" in r.stderr
    assert not list(isolated.rglob("*.yaml"))  # no copy, no draft


def test_cluster_edit_has_the_discard_it_suggests(napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDITOR", "false")
    failed = napkin("cluster", "edit", "dgx-h100")
    assert failed.exit_code == 1 and "'napkin cluster edit dgx-h100 --discard' deletes it" in failed.stderr
    discarded = napkin("cluster", "edit", "dgx-h100", "--discard")
    assert discarded.exit_code == 0 and "discarded" in discarded.stderr


# ---------------------------------------------------------------------------------- benchmarks' results


def _fake_matmul(monkeypatch: pytest.MonkeyPatch, calls: list[str]) -> None:
    """A matmul benchmark that 'measures' one bf16 result on an H100, without torch or a GPU."""
    from napkin.live import bench

    record = bench.MatmulRecord(
        device="cuda",
        device_name="NVIDIA H100 80GB HBM3",
        dtype="bf16",
        m=8192,
        k=8192,
        n=8192,
        status="ok",
        seconds=1e-3,
        flops_per_second=7.0e14,
        repeats=3,
    )

    def run(**_: object) -> bench.BenchResult:
        calls.append("run")
        return bench.BenchResult(
            device="cuda",
            device_name=record.device_name,
            torch_version="x",
            hardware="h100-sxm",
            records=[record],
            best={"bf16": record},
        )

    monkeypatch.setattr(bench, "import_torch", object)
    monkeypatch.setattr(bench, "pick_device", lambda torch, device: "cuda")
    monkeypatch.setattr(bench, "device_name", lambda torch, device: record.device_name)
    monkeypatch.setattr(bench, "run", run)


def test_bench_save_refuses_a_broken_measurements_file_before_measuring(
    napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    _fake_matmul(monkeypatch, calls)
    isolated.mkdir(parents=True, exist_ok=True)
    (isolated / "measurements.yaml").write_text(": : [\n")
    r = napkin("bench", "matmul", "--hardware", "h100", "--save")
    assert r.exit_code == 1 and "measurements.yaml:1" in r.stderr and calls == []  # nothing run, nothing lost


def test_bench_save_prints_the_measurement_before_saving(
    napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from napkin.errors import NapkinError
    from napkin.live import bench

    calls: list[str] = []
    _fake_matmul(monkeypatch, calls)

    def failing_save(*_: object, **__: object) -> None:
        raise NapkinError("cannot write measurements.yaml: No space left on device")

    monkeypatch.setattr(bench, "save_best", failing_save)
    r = napkin("bench", "matmul", "--hardware", "h100", "--save")
    assert r.exit_code == 1 and "No space left on device" in r.stderr
    assert "700 TFLOP/s" in r.stdout  # the measured number survives the failed save


def test_bench_all_reduce_that_measured_nothing_exits_1(napkin: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from napkin.live import bench_comm

    empty = bench_comm.CommBenchResult(
        backend="gloo", world_size=2, op="all-reduce", device="cpu", torch_version="x", records=[], best=None
    )
    monkeypatch.setattr(bench_comm, "prepare", lambda *args: (object(), 2))
    monkeypatch.setattr(bench_comm, "run", lambda *args, **kwargs: empty)
    r = napkin("bench", "all-reduce", "--budget", "1")
    assert r.exit_code == 1 and "nothing measured within the 1 s budget" in r.stderr


def test_a_cluster_folder_that_cannot_be_listed_is_reported_not_blamed_on_the_output(
    napkin: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$NAPKIN_CLUSTER_PATH naming a folder napkin may not list (root ignores chmod, so the refusal is simulated)
    is one problem naming the folder; the built-in clusters still answer."""
    locked = tmp_path / "locked"
    locked.mkdir()
    listing = Path.iterdir

    def iterdir(self: Path):  # type: ignore[no-untyped-def]
        if self == locked:
            raise PermissionError(13, "Permission denied")
        return listing(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    monkeypatch.setenv("NAPKIN_CLUSTER_PATH", str(locked))
    listed = napkin("cluster", "list")
    assert listed.exit_code == 0 and f"{locked}: cannot list: Permission denied" in listed.stderr
    assert "cannot write the output" not in listed.stderr
    used = napkin("comm", "all-reduce", "--bytes", "1GB", "--cluster", "dgx-h100")
    assert used.exit_code == 0, used.stderr
