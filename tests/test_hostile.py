"""Hostile inputs and environments (issue 10): each case states the exit code and the message.

Every row of ``CASES`` is (category, id, setup, argv, exit code, a fragment of stderr). ``setup``
prepares the user's config directory (``cfg``) and environment before the command runs. The cases
that need a real process (pipes, encodings, signals, /dev/full) are at the end and run ``python -m
napkin``. A case passes only if there is no traceback, the exit code is the one stated, and stderr
holds the fragment.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from napkin import units
from napkin.errors import UsageError
from tests.conftest import Run

ROOT = Path(__file__).resolve().parent.parent
H100 = (ROOT / "hardware" / "h100-sxm.yaml").read_text()
TRAIN = ["train-time", "-N", "70B", "-D", "15T", "-G", "8"]


def profile(
    name: str, *, aliases: str = "[]", display: str = "Test box", extra: str = "", memory: str = "80 GB"
) -> str:
    return (
        f"name: {name}\ndisplay_name: {display}\nvendor: Test\naliases: {aliases}\nmemory: {memory}\n"
        f"memory_bandwidth: 3 TB/s\npeak_flops:\n  bf16: 100 TFLOP/s\n"
        f"sources:\n  - title: test fixture\n    url: https://example.com/\n{extra}"
    )


Setup = Callable[[Path, pytest.MonkeyPatch], None]


def put(name: str, text: str | bytes) -> Setup:
    def setup(cfg: Path, _: pytest.MonkeyPatch) -> None:
        path = cfg / "hardware" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)

    return setup


def fifo(name: str) -> Setup:
    def setup(cfg: Path, _: pytest.MonkeyPatch) -> None:
        (cfg / "hardware").mkdir(parents=True, exist_ok=True)
        os.mkfifo(cfg / "hardware" / name)

    return setup


def symlink(name: str, target: str) -> Setup:
    def setup(cfg: Path, _: pytest.MonkeyPatch) -> None:
        (cfg / "hardware").mkdir(parents=True, exist_ok=True)
        (cfg / "hardware" / name).symlink_to(target)

    return setup


def env(name: str, value: str) -> Setup:
    def setup(_: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(name, value)

    return setup


def both(*setups: Setup) -> Setup:
    def setup(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        for one in setups:
            one(cfg, monkeypatch)

    return setup


def nothing(_: Path, __: pytest.MonkeyPatch) -> None:
    pass


def config_is_a_file(cfg: Path, _: pytest.MonkeyPatch) -> None:
    cfg.write_text("x")


def models_file(name: str, preset: str) -> Setup:
    def setup(cfg: Path, _: pytest.MonkeyPatch) -> None:
        (cfg / "models").mkdir(parents=True, exist_ok=True)
        (cfg / "models" / name).write_text(
            f"{preset}:\n  description: mine\n  source: me\n  published_params: 1e9\n  seq: 2048\n"
            "  model: {context: 2048, layers: 16, hidden: 2048, heads: 16, vocab: 32000, mlp: swiglu, norm: rmsnorm}\n"
        )

    return setup


def measurements(text: str | bytes) -> Setup:
    def setup(cfg: Path, _: pytest.MonkeyPatch) -> None:
        cfg.mkdir(parents=True, exist_ok=True)
        path = cfg / "measurements.yaml"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return setup


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
    for i in range(8)
)
NAME_BOMB = BOMB + profile("bomb").replace("name: bomb", "name: *i")

CASES: list[tuple[str, str, Setup, list[str], int, str]] = [
    # --- files in the profile directory: never hang, never exhaust, the default still works
    ("files", "fifo-named-yaml", fifo("h100-sxm.yaml"), TRAIN, 0, ""),
    ("files", "fifo-looked-up-by-its-name", fifo("mine.yaml"), [*TRAIN, "-H", "mine"], 1, "not a regular file"),
    ("files", "symlink-to-dev-zero", symlink("zero.yaml", "/dev/zero"), TRAIN, 0, ""),
    ("files", "dev-zero-by-name", symlink("zero.yaml", "/dev/zero"), [*TRAIN, "-H", "zero"], 1, "not a regular"),
    ("files", "directory-named-yaml", lambda c, m: (c / "hardware" / "d.yaml").mkdir(parents=True), TRAIN, 0, ""),
    ("files", "alias-bomb-in-name", put("bomb.yaml", NAME_BOMB), [*TRAIN, "-H", "bomb"], 1, "anchors and aliases"),
    ("files", "alias-bomb-elsewhere", put("bomb.yaml", NAME_BOMB), TRAIN, 0, ""),
    (
        "files",
        "merge-key",
        put("m.yaml", "base: &b {vendor: X}\n<<: *b\n" + profile("m")),
        [*TRAIN, "-H", "m"],
        1,
        "anchors and aliases",
    ),
    ("files", "deep-nesting", put("deep.yaml", "[" * 5000 + "]" * 5000), [*TRAIN, "-H", "deep"], 1, "deep.yaml"),
    ("files", "too-big", put("big.yaml", "# " + "x" * (2 << 20)), [*TRAIN, "-H", "big"], 1, "larger than napkin reads"),
    ("files", "not-utf8", put("latin.yaml", b"name: caf\xe9\n"), [*TRAIN, "-H", "latin"], 1, "not UTF-8"),
    (
        "files",
        "top-level-list",
        put("list.yaml", "- name: list\n"),
        [*TRAIN, "-H", "list"],
        1,
        "must be a YAML mapping",
    ),
    (
        "files",
        "python-tag",
        put("evil.yaml", profile("evil", extra="notes: !!python/name:os.system\n")),
        [*TRAIN, "-H", "evil"],
        1,
        "not valid YAML (safe subset)",
    ),
    ("files", "config-dir-is-a-file", config_is_a_file, TRAIN, 0, ""),
    (
        "files",
        "new-into-a-config-file",
        config_is_a_file,
        ["hardware", "new", "a", "--from", "h100"],
        1,
        "cannot write",
    ),
    (
        "files",
        "config-dir-cannot-be-made",
        env("NAPKIN_CONFIG_DIR", "/proc/napkin-cannot"),
        ["hardware", "new", "a", "--from", "h100"],
        1,
        "cannot write",
    ),
    ("files", "validate-dev-zero", nothing, ["hardware", "validate", "/dev/zero"], 1, "not a regular file"),
    ("files", "validate-fifo-in-dir", fifo("f.yaml"), ["hardware", "validate"], 1, "not a regular file"),
    ("files", "unreadable-hardware-path", env("NAPKIN_HARDWARE_PATH", "/proc/1/fd"), TRAIN, 0, ""),
    ("files", "hardware-path-is-a-file", env("NAPKIN_HARDWARE_PATH", "/etc/hostname"), TRAIN, 0, ""),
    ("files", "hardware-file-fifo", nothing, [*TRAIN, "--hardware-file", "/dev/stdin"], 2, "--hardware-file"),
    ("files", "hardware-file-dev-zero", nothing, [*TRAIN, "--hardware-file", "/dev/zero"], 2, "not a regular file"),
    ("files", "hardware-file-directory", nothing, [*TRAIN, "--hardware-file", "/"], 2, "not a regular file"),
    ("files", "broken-symlink", symlink("gone.yaml", "/nonexistent/x.yaml"), TRAIN, 0, ""),
    # --- names: claimed twice is an error naming both files; replacing a built-in by name is said
    (
        "names",
        "user-alias-takes-h100",
        put("fake.yaml", profile("fake", aliases="[h100]")),
        TRAIN,
        1,
        "claimed by your profile 'fake'",
    ),
    (
        "names",
        "user-name-is-a-builtin-alias",
        put("h100.yaml", profile("h100")),
        TRAIN,
        0,
        "napkin: h100 → your profile at",
    ),
    (
        "names",
        "user-replaces-builtin-by-name",
        put("h100-sxm.yaml", profile("h100-sxm", aliases="[h100]")),
        TRAIN,
        0,
        "instead of the built-in h100-sxm",
    ),
    (
        "names",
        "two-user-files-one-name",
        both(put("a.yaml", profile("box")), put("b.yaml", profile("box"))),
        [*TRAIN, "-H", "box"],
        1,
        "b.yaml",
    ),
    (
        "names",
        "two-user-files-other-names-work",
        both(put("a.yaml", profile("box")), put("b.yaml", profile("box"))),
        TRAIN,
        0,
        "",
    ),
    (
        "names",
        "list-warns-of-a-conflict",
        put("fake.yaml", profile("fake", aliases="[h100]")),
        ["hardware", "list"],
        0,
        "claimed by your profile 'fake'",
    ),
    (
        "names",
        "validate-reports-a-conflict",
        put("fake.yaml", profile("fake", aliases="[h100]")),
        ["hardware", "validate"],
        1,
        "claimed by your profile 'fake'",
    ),
    ("names", "user-model-preset", models_file("mine.yaml", "my-1b"), ["memory", "--model", "my-1b", "-G", "1"], 0, ""),
    (
        "names",
        "user-model-preset-takes-builtin",
        models_file("mine.yaml", "llama3-8b"),
        ["models"],
        1,
        "given by both <built-in>/models.yaml and",
    ),
    ("names", "empty-hardware", nothing, [*TRAIN, "--hardware", ""], 2, "--hardware: an empty name"),
    ("names", "blank-hardware", nothing, [*TRAIN, "--hardware", " - "], 2, "is not a profile name"),
    ("names", "env-blamed", env("NAPKIN_HARDWARE", "nope"), TRAIN, 2, "$NAPKIN_HARDWARE: unknown hardware 'nope'"),
    ("names", "from-blamed", nothing, ["hardware", "new", "x", "--from", "nope"], 2, "--from: unknown hardware"),
    ("names", "positional-blamed", nothing, ["hardware", "show", "nope"], 2, "NAME: unknown hardware"),
    ("names", "compare-blamed", nothing, ["hardware", "compare", "h100", "nope"], 2, "NAMES: unknown hardware"),
    ("names", "nvidia-h100-suggests-h100", nothing, [*TRAIN, "-H", "nvidia-h100"], 2, "closest: h100-sxm,"),
    ("names", "dtype-upper-case", nothing, [*TRAIN, "--dtype", "BF16"], 0, ""),
    ("names", "new-without-from", nothing, ["hardware", "new", "mine"], 2, "--from: which profile"),
    (
        "names",
        "new-shadowing-builtin",
        nothing,
        ["hardware", "new", "h100", "--from", "h100"],
        2,
        "built-in profile h100-sxm's name",
    ),
    ("names", "new-bad-slug", nothing, ["hardware", "new", "\x1b[2J", "--from", "h100"], 2, "NAME:"),
    ("names", "discard-nothing", nothing, ["hardware", "edit", "h100", "--discard"], 2, "no unsaved draft"),
    # --- numbers: finite or a one-line error naming the input
    ("numbers", "params-1e308", nothing, ["train-time", "--params", "1e308", "-D", "1T", "-G", "8"], 2, "--params:"),
    ("numbers", "days-subnormal", nothing, ["train-time", "-N", "70B", "--days", "1e-320", "-G", "8"], 2, "--days:"),
    ("numbers", "mfu-subnormal", nothing, [*TRAIN, "--mfu", "1e-320"], 2, "--mfu:"),
    ("numbers", "mfu-superscript", nothing, [*TRAIN, "--mfu", "½"], 2, "--mfu:"),
    ("numbers", "matmul-1e308", nothing, ["flops", "matmul", "1", "1", "1e308"], 2, "N:"),
    ("numbers", "gpus-1e308", nothing, ["train-time", "-N", "70B", "-D", "15T", "--gpus", "1e308"], 2, "--gpus:"),
    (
        "numbers",
        "gpus-above-2^53",
        nothing,
        ["train-time", "-N", "70B", "-D", "15T", "--gpus", "1e16"],
        2,
        "--gpus: '1e16' is larger than napkin counts exactly",
    ),
    ("numbers", "compute-smallest-double", nothing, ["optimal", "--compute", "5e-324"], 2, "--compute:"),
    ("numbers", "reserve-superscript", nothing, ["max-model", "--reserve", "²"], 2, "ASCII digits only"),
    ("numbers", "reserve-exponent-fraction", nothing, ["max-model", "--reserve", "1e-1"], 2, "ambiguous"),
    ("numbers", "reserve-percent", nothing, ["max-model", "--reserve", "10%"], 0, ""),
    ("numbers", "reserve-plain-fraction", nothing, ["max-model", "--reserve", "0.1"], 0, ""),
    ("numbers", "reserve-gigabits", nothing, ["max-model", "--reserve", "4gb"], 2, "would be bits"),
    ("numbers", "arabic-indic-digits", nothing, [*TRAIN[:-1], "٨"], 2, "ASCII digits only"),
    ("numbers", "fullwidth-digits", nothing, ["train-time", "-N", "７０B", "-D", "15T", "-G", "8"], 2, "--params:"),
    (
        "numbers",
        "60-kB-value",
        nothing,
        ["train-time", "-N", "1" * 60_000, "-D", "15T", "-G", "8"],
        2,
        "too long for a number",
    ),
    (
        "numbers",
        "1-MB-value",
        nothing,
        ["train-time", "-N", "1" + " " * 1_000_000 + "x", "-D", "1T", "-G", "8"],
        2,
        "too long",
    ),
    ("numbers", "inf", nothing, ["train-time", "-N", "inf", "-D", "15T", "-G", "8"], 2, "--params: 'inf'"),
    ("numbers", "nan", nothing, ["train-time", "-N", "nan", "-D", "15T", "-G", "8"], 2, "--params: 'nan'"),
    ("numbers", "price-inf", nothing, [*TRAIN, "--price", "$inf"], 2, "--price:"),
    ("numbers", "price-1e400", nothing, [*TRAIN, "--price", "1e400"], 2, "--price:"),
    ("numbers", "tensor-300-digits", nothing, ["tensor", "x".join(["9" * 300] * 2)], 2, "napkin: error:"),
    ("numbers", "tensor-300-dims", nothing, ["tensor", "x".join(["100000"] * 300)], 2, "napkin: error:"),
    ("numbers", "negative", nothing, ["train-time", "-N", "-7B", "-D", "15T", "-G", "8"], 2, "--params:"),
    ("numbers", "empty", nothing, ["train-time", "-N", "", "-D", "15T", "-G", "8"], 2, "--params:"),
    # --- values from profile files: bits are not bytes, non-finite values are refused
    (
        "profile-values",
        "memory-in-gigabits",
        put("gb.yaml", profile("gb", memory="80 Gb")),
        [*TRAIN, "-H", "gb"],
        1,
        "'Gb' would be bits",
    ),
    (
        "profile-values",
        "bandwidth-in-gbps-converted",
        put("bw.yaml", profile("bw").replace("3 TB/s", "24000 Gbps")),
        ["hardware", "show", "bw", "--json"],
        0,
        "",
    ),
    (
        "profile-values",
        "price-inf",
        put("p.yaml", profile("p", extra="price_per_hour: .inf\n")),
        [*TRAIN, "-H", "p"],
        1,
        "price_per_hour",
    ),
    (
        "profile-values",
        "price-nan",
        put("p.yaml", profile("p", extra="price_per_hour: .nan\n")),
        [*TRAIN, "-H", "p"],
        1,
        "price_per_hour",
    ),
    (
        "profile-values",
        "peak-400-digits",
        put("p.yaml", profile("p").replace("100 TFLOP/s", "9" * 400)),
        [*TRAIN, "-H", "p"],
        1,
        "p.yaml:8: a number of 400 characters is longer than napkin reads",
    ),
    ("profile-values", "measurements-a-list", measurements("- 1\n- 2\n"), TRAIN, 0, "saved measurements ignored"),
    ("profile-values", "measurements-bad-bytes", measurements(b"\xff\xfe\x00"), TRAIN, 0, "saved measurements ignored"),
    (
        "profile-values",
        "measurements-400-digits",
        measurements("h100-sxm:\n  bf16: {flops_per_second: " + "9" * 400 + ", date: x, device: y}\n"),
        TRAIN,
        0,
        "saved measurements ignored: ",
    ),
    (
        "profile-values",
        "measured-peak-when-broken",
        measurements("- 1\n"),
        [*TRAIN, "--peak", "measured"],
        2,
        "no saved bf16 measurement",
    ),
    # --- text from files is data: markup and escape sequences never act
    ("text", "markup-in-alias", put("m.yaml", profile("m", aliases="['[/]', '[bold]x']")), ["hardware", "list"], 0, ""),
    ("text", "markup-in-title", put("m.yaml", profile("m", display="'[/]'")), ["hardware", "show", "m"], 0, ""),
    (
        "text",
        "escape-in-title",
        put("m.yaml", profile("m", display='"\\e]0;pwned\\a\\e[2J"')),
        ["hardware", "show", "m"],
        0,
        "",
    ),
    ("text", "escape-in-file-name", put("\x1b[2Jx.yaml", "name: [\n"), ["hardware", "list"], 0, "invalid profile"),
    (
        "text",
        "escape-in-a-valid-file-name",
        put("\x1b]0;t\x07ok.yaml", profile("okname")),
        ["hardware", "validate"],
        0,
        "",
    ),
    ("text", "escape-in-list-of-a-valid-file", put("\x1b[2Jok.yaml", profile("okname")), ["hardware", "list"], 0, ""),
    (
        "text",
        "not-a-profile-file",
        nothing,
        [*TRAIN, "--hardware-file", "/etc/passwd"],
        2,
        "--hardware-file: /etc/passwd:1: a hardware profile must be a YAML mapping",
    ),
    (
        "text",
        "key-lines-not-echoed",
        put("s.yaml", "root: x\n" + "secret-line-" + "y" * 200 + ": z\n"),
        [*TRAIN, "-H", "s"],
        1,
        "not a napkin hardware profile",
    ),
]


@pytest.mark.parametrize(
    ("category", "case", "setup", "argv", "code", "fragment"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES]
)
def test_hostile_case(
    napkin: Run,
    isolated: Path,
    monkeypatch: pytest.MonkeyPatch,
    category: str,
    case: str,
    setup: Setup,
    argv: list[str],
    code: int,
    fragment: str,
) -> None:
    setup(isolated, monkeypatch)
    r = napkin(*argv)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.stderr
    assert r.exit_code == code, r.stderr
    assert fragment in r.stderr, r.stderr
    if code:
        lines = [line for line in r.stderr.splitlines() if line.startswith("napkin: error:")]
        assert len(lines) == 1 and "\x1b" not in lines[0], r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert not re.search(r"\b(inf|nan)\b", r.stdout, re.IGNORECASE), r.stdout
    if category == "text" and case == "key-lines-not-echoed":
        assert "secret-line" not in r.stderr


def test_text_from_files_prints_as_itself(napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put("m.yaml", profile("m", aliases="['[/]']", display='"[bold]B\\e[2J"'))(isolated, monkeypatch)
    r = napkin("hardware", "show", "m")
    assert r.exit_code == 0 and "[/]" in r.stdout and "[bold]B[2J" in r.stdout and "\x1b" not in r.stdout


def test_bits_are_converted_and_said(napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put("bw.yaml", profile("bw").replace("3 TB/s", "24000 Gbps"))(isolated, monkeypatch)
    assert json.loads(napkin("hardware", "show", "bw", "--json").stdout)["memory_bandwidth"] == 3e12
    assert units.parse_bandwidth("400 Gbit/s") == 50e9 and units.parse_bytes("8 Gbit") == 1e9


def test_json_is_strict_even_for_absurd_results(napkin: Run) -> None:
    r = napkin("mfu", "-N", "1e36", "--tokens-per-second", "1e12", "-G", "1", "--json")
    assert r.exit_code in (0, 2)
    if r.exit_code == 0:
        json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
    else:
        assert "not a finite number" in r.stderr


# ------------------------------------------------------------------------------ files: writes


def test_exclusive_writes_have_exactly_one_winner(isolated: Path) -> None:
    """Many threads create one name at the same moment, 40 times over: exactly one of each round succeeds and
    the file holds the winner's text whole (os.link / O_EXCL; the syscalls release the GIL, so the threads race
    for real). The command-line path is one pair of processes below."""
    from napkin.errors import NapkinError
    from napkin.io.files import write_atomic

    def race(target: Path, writers: int = 4) -> tuple[list[int], list[str]]:
        start = threading.Barrier(writers)
        won: list[int] = []
        lost: list[str] = []

        def one(i: int) -> None:
            start.wait()
            try:
                write_atomic(target, f"writer {i}\n" * 1000, overwrite=False)
                won.append(i)
            except NapkinError as exc:
                lost.append(str(exc))

        threads = [threading.Thread(target=one, args=(i,)) for i in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return won, lost

    for round_ in range(40):
        target = isolated / f"race{round_}.yaml"
        won, lost = race(target)
        assert len(won) == 1 and len(lost) == 3 and all("already exists" in m for m in lost)
        assert target.read_text() == f"writer {won[0]}\n" * 1000
        assert sorted(p.name for p in isolated.glob(f".race{round_}*")) == []  # no temporary file left


def test_hardware_new_race_from_the_command_line_has_one_winner(isolated: Path) -> None:
    env = {**os.environ, "NAPKIN_CONFIG_DIR": str(isolated)}
    argv = [sys.executable, "-m", "napkin", "hardware", "new", "twin", "--from", "h100"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    results = [(p.communicate(timeout=120)[1].decode(), p.returncode) for p in procs]
    assert sorted(code for _, code in results) == [0, 1], results
    assert any("already exists" in err for err, _ in results)


def test_concurrent_measurement_saves_lose_nothing(isolated: Path) -> None:
    from napkin.systems.measurements import Measurement, for_profile, save

    def one(i: int) -> None:
        save(f"box{i}", "bf16", Measurement(flops_per_second=1e12 + i, date="2026-01-01", device="X"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(for_profile(f"box{i}")[0] for i in range(12))


def test_edit_writes_through_a_symlink_and_keeps_the_mode(
    napkin: Run, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = tmp_path / "dotfiles" / "lab.yaml"
    real.parent.mkdir()
    real.write_text(profile("lab"))
    real.chmod(0o640)
    link = isolated / "hardware" / "lab.yaml"
    link.parent.mkdir(parents=True)
    link.symlink_to(real)
    editor = tmp_path / "ed.py"
    editor.write_text("import sys\np = sys.argv[1]\nopen(p, 'a').write('notes: edited\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    r = napkin("hardware", "edit", "lab")
    assert r.exit_code == 0, r.stderr
    assert link.is_symlink() and "notes: edited" in real.read_text()
    assert stat.S_IMODE(real.stat().st_mode) == 0o640


def test_a_failed_edit_says_how_to_discard_the_draft(
    napkin: Run, isolated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put("lab.yaml", profile("lab"))(isolated, monkeypatch)
    editor = tmp_path / "ed.py"
    editor.write_text("import sys\nopen(sys.argv[1], 'a').write('memroy: 1\\n')\n")
    monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")
    r = napkin("hardware", "edit", "lab")
    assert r.exit_code == 1 and "'napkin hardware edit lab --discard' deletes it" in r.stderr
    draft = isolated / "hardware" / ".lab.draft.yaml"
    assert draft.exists()
    r = napkin("hardware", "edit", "lab", "--discard")
    assert r.exit_code == 0 and not draft.exists() and r.stderr.startswith("napkin: discarded")


@pytest.mark.parametrize(
    "source",
    [
        profile("src", aliases="\n  - one\n  - two"),
        profile("src").replace("name: src", '"name": src'),
        profile("src").replace("name: src", "name: src  # the name\n# a comment line"),
        "{name: src, display_name: Test box, vendor: Test, aliases: [a, b], memory: 80 GB,\n"
        " memory_bandwidth: 3 TB/s, peak_flops: {bf16: 100 TFLOP/s},\n"
        " sources: [{title: test fixture, url: 'https://example.com/'}]}\n",
    ],
    ids=["block-aliases", "quoted-key", "comments", "flow-style"],
)
def test_new_from_copies_by_parsing_not_regex(
    napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    env_dir = isolated.parent / "env"
    env_dir.mkdir()
    (env_dir / "src.yaml").write_text(source)
    monkeypatch.setenv("NAPKIN_HARDWARE_PATH", str(env_dir))
    r = napkin("hardware", "new", "copy", "--from", "src")
    assert r.exit_code == 0, r.stderr
    assert r.stderr.startswith("napkin: created") and "warning" not in r.stderr
    shown = json.loads(napkin("hardware", "show", "copy", "--json").stdout)
    assert shown["name"] == "copy" and shown["aliases"] == [] and shown["display_name"] == "Test box"
    text = (isolated / "hardware" / "copy.yaml").read_text()
    if "# a comment line" in source:
        assert "# a comment line" in text  # comments survive the copy


# ------------------------------------------------------------------------- the number parser

PARSERS = [
    units.parse_count,
    units.parse_bytes,
    units.parse_rate,
    units.parse_bandwidth,
    units.parse_duration,
    units.parse_number,
    units.parse_power,
    units.parse_flops,
]


@given(st.text(max_size=200), st.sampled_from(PARSERS))
def test_any_text_parses_to_a_finite_in_range_value_or_a_clean_error(text: str, parser: Callable[..., float]) -> None:
    try:
        value = parser(text, "--x")
    except UsageError as exc:
        assert str(exc).startswith("--x: ") and "\n" not in str(exc).replace(text, "")
        return
    assert math.isfinite(value) and units.MIN_VALUE <= value <= units.MAX_VALUE


@given(
    st.from_regex(r"[+-]?[0-9]{1,40}(\.[0-9]{0,40})?([eE][+-]?[0-9]{1,5})?", fullmatch=True),
    st.sampled_from(["", " ", "k", "M", "B", "T", "GB", "GiB", "TB/s", "Gbps", "Gb", "%", "s", "d"]),
    st.sampled_from([*PARSERS, units.parse_fraction, units.parse_int]),
)
def test_numbers_with_units_are_finite_or_a_clean_error(number: str, unit: str, parser: Callable[..., float]) -> None:
    try:
        value = parser(number + unit, "--x")
    except UsageError as exc:
        assert str(exc).startswith("--x: ")
        return
    assert math.isfinite(value) and value > 0


@given(st.text(alphabet="0123456789²³¹⁰٠١٢٣۴५੬௭๘០᠑１２", min_size=1, max_size=20))
def test_only_ascii_digits_are_numbers(text: str) -> None:
    if text.isascii():
        assert text.strip("0") == "" or units.parse_count(text) == float(text)
    else:
        with pytest.raises(UsageError, match="ASCII digits only"):
            units.parse_count(text)


# ------------------------------------------------------------------ terminals, pipes and signals


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    full_env = {**os.environ, **(env or {})}
    argv = [sys.executable, "-m", "napkin", *args]
    return subprocess.run(argv, env=full_env, capture_output=True, timeout=120, check=False)


def _main_on(argv: list[str], encoding: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, bytes, bytes]:
    """``napkin.cli.main`` in this process, on stdout and stderr that encode as ``encoding`` (what
    PYTHONIOENCODING or an uncoerced C locale gives a real process)."""
    from napkin.cli import main

    out, err = io.BytesIO(), io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out, encoding=encoding, write_through=True))
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(err, encoding=encoding, write_through=True))
    monkeypatch.setattr(sys, "argv", ["napkin", *argv])
    with pytest.raises(SystemExit) as exit_:
        main()
    return exit_.value.code or 0, out.getvalue(), err.getvalue()  # type: ignore[return-value]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
@pytest.mark.parametrize("argv", [TRAIN, ["hardware", "list"], ["dtypes"], ["memory", "-N", "7B", "-G", "1"]])
def test_tables_fall_back_to_ascii(encoding: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = _main_on(argv, encoding, monkeypatch)
    assert code == 0, err.decode(encoding)
    assert out and b"Traceback" not in err
    out.decode("ascii" if encoding == "ascii" else encoding)  # what the stream could encode, nothing else


def test_a_closed_pipe_ends_quietly_with_141() -> None:
    for argv in (["dtypes"], ["hardware", "list", "--json"], TRAIN):
        with subprocess.Popen(
            [sys.executable, "-m", "napkin", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        ) as proc:
            assert proc.stdout is not None
            proc.stdout.close()
            _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (141, b"")


def test_a_full_disk_is_one_line_and_exit_1() -> None:
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-m", "napkin", "hardware", "list"],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=120,
            check=False,
        )
    assert r.returncode == 1
    assert r.stderr.decode() == "napkin: error: cannot write the output: No space left on device\n"


def test_a_stdout_closed_by_the_shell_is_quiet_and_one_closed_later_is_one_line() -> None:
    shell = subprocess.run(
        ["sh", "-c", f"'{sys.executable}' -m napkin dtypes >&-"], stderr=subprocess.PIPE, timeout=120, check=False
    )
    assert (shell.returncode, shell.stderr) == (0, b"")
    later = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, sys; os.close(1); sys.argv = ['napkin', 'dtypes'];from napkin._entry import main; main()",
        ],
        stderr=subprocess.PIPE,
        timeout=120,
        check=False,
    )
    assert (later.returncode, later.stderr) == (1, b"napkin: error: cannot write the output: Bad file descriptor\n")


@pytest.mark.parametrize("columns", ["²", "0", "-5", "99999999", "abc"])
def test_odd_columns(columns: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    code, out, err = _main_on(["hardware", "list"], "utf-8", monkeypatch)
    assert code == 0 and out and b"Traceback" not in err


#: A program named ``napkin`` (as the console script is) that sends itself SIGINT at a chosen moment:
#: right after napkin's package has run its first lines, or in the middle of a command. The signal
#: is handled at the next bytecode, so the moment is exact; no sleep decides what the test sees.
CTRL_C_AT = """
import os, signal, sys, time
import napkin
if sys.argv[1] == "loading":
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)  # never reached: the signal ends the process while the CLI would load
import napkin.api
def interrupted(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)  # never reached
napkin.api.hardware_list = interrupted
sys.argv = ["napkin", "hardware", "list"]
from napkin._entry import main
main()
"""


@pytest.mark.parametrize("moment", ["loading", "running"])
def test_ctrl_c_exits_130_without_a_traceback(moment: str, tmp_path: Path) -> None:
    """SIGINT while the command loads its modules, and while it runs: one line, exit 130, no traceback.

    Before napkin's first line runs, a SIGINT belongs to Python's own start-up; napkin cannot run code
    earlier than that, so that moment is not tested.
    """
    program = tmp_path / "napkin"
    program.write_text(CTRL_C_AT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(program), moment], capture_output=True, timeout=120, check=False)
    assert b"Traceback" not in done.stderr, done.stderr.decode(errors="replace")
    assert done.returncode == 130
    assert done.stderr == b"napkin: interrupted\n"


def test_a_library_user_keeps_their_own_ctrl_c() -> None:
    """Importing napkin from a program of one's own leaves its SIGINT handler alone (whatever it is: a test run
    started in the background inherits SIGINT ignored, and napkin must leave that alone too)."""
    code = "import signal; mine = signal.getsignal(signal.SIGINT); import napkin; print(signal.getsignal(signal.SIGINT) is mine)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=True)
    assert done.stdout == b"True\n"
