"""Cluster profiles: the shipped files, bits vs bytes, the lookup order, and ``napkin cluster``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from napkin.errors import ProfileError, UsageError
from napkin.systems import cluster, profiles
from tests.conftest import Run

BUILT_IN = sorted(Path(__file__).resolve().parent.parent.joinpath("clusters").glob("*.yaml"))

MINIMAL = """\
name: tiny
display_name: Tiny test cluster
device: h100
devices_per_node: 2
scale_up: {name: link, bandwidth: 100 GB/s, latency: 1 us, domain_size: 2}
scale_out: {name: net, nics_per_node: 1, nic_bandwidth: 100 Gbit/s, latency: 10 us}
sources: [{title: a test, url: "doc:test"}]
"""


def test_every_built_in_is_valid_and_names_a_known_device() -> None:
    catalog = cluster.load_catalog()
    assert not catalog.broken
    names = {c.cluster.name for c in catalog.clusters}
    required = {"dgx-a100", "dgx-h100", "dgx-h200", "hgx-b200", "gb200-nvl72", "mi300x-node", "tpu-v5p-slice"}
    assert required <= names
    for loaded in catalog.clusters:
        profiles.find(loaded.cluster.device)  # raises if the device profile is missing


@pytest.mark.parametrize("path", BUILT_IN, ids=lambda p: p.name)
def test_every_file_states_direction_and_bits_vs_bytes(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert "PER DIRECTION" in text
    assert "bits" in text.lower() or "scale_out" not in text


@pytest.mark.parametrize(
    ("name", "per_direction"),
    [("dgx-a100", 300e9), ("dgx-h100", 450e9), ("hgx-b200", 900e9), ("gb200-nvl72", 900e9), ("hgx-h800", 200e9)],
)
def test_nvlink_figures_are_half_the_bidirectional_datasheet(name: str, per_direction: float) -> None:
    device = profiles.find(cluster.find(name).cluster.device).profile
    assert cluster.find(name).cluster.scale_up.bandwidth == pytest.approx(per_direction)
    assert device.interconnect_bandwidth == pytest.approx(2 * per_direction)


def test_nic_speed_in_bits_is_divided_by_eight() -> None:
    assert cluster.parse_link_bandwidth("400 Gbit/s") == pytest.approx(50e9)
    assert cluster.parse_link_bandwidth("200Gbit/s") == pytest.approx(25e9)
    assert cluster.parse_link_bandwidth("50 GB/s") == pytest.approx(50e9)
    for ambiguous in ("400 Gb/s", "400 Gbps"):
        with pytest.raises(UsageError, match="ambiguous"):
            cluster.parse_link_bandwidth(ambiguous)


def test_latency_units() -> None:
    assert cluster.parse_latency("3.4 us") == pytest.approx(3.4e-6)
    assert cluster.parse_latency("14 µs") == pytest.approx(14e-6)
    assert cluster.parse_latency("0.5 ms") == pytest.approx(5e-4)
    with pytest.raises(UsageError):
        cluster.parse_latency("fast")


def test_errors_name_file_line_and_field() -> None:
    bad = MINIMAL.replace("nic_bandwidth: 100 Gbit/s", "nic_bandwidth: 100 Gb/s")
    with pytest.raises(ProfileError, match=r"x.yaml:6: scale_out.nic_bandwidth: .*ambiguous"):
        cluster.parse_cluster(bad, "x.yaml")
    with pytest.raises(ProfileError, match=r"domain_size .* must divide"):
        cluster.parse_cluster(MINIMAL.replace("domain_size: 2", "domain_size: 3"), "x.yaml")
    with pytest.raises(ProfileError, match="unknown field"):
        cluster.parse_cluster(MINIMAL + "speed: 3\n", "x.yaml")


def test_user_and_env_directories_shadow_built_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "dgx-h100.yaml").write_text(MINIMAL.replace("name: tiny", "name: dgx-h100"), encoding="utf-8")
    monkeypatch.setenv(cluster.ENV_CLUSTER_PATH, str(env_dir))
    loaded = cluster.find("DGX_H100")
    assert loaded.origin == "env" and loaded.cluster.devices_per_node == 2
    catalog = cluster.load_catalog()
    assert [c.origin for c in catalog.visible() if c.cluster.name == "dgx-h100"] == ["env"]


def test_cli_list_show_new_validate(napkin: Run, isolated: Path) -> None:
    listed = napkin("cluster", "list", "--json")
    assert listed.exit_code == 0 and "gb200-nvl72" in listed.stdout
    shown = napkin("cluster", "show", "dgx-h100")
    assert shown.exit_code == 0 and "400 Gbit/s" in shown.stdout and "450 GB/s" in shown.stdout
    assert json.loads(napkin("cluster", "show", "nvl72", "--json").stdout)["scale_up"]["domain_size"] == 72
    made = napkin("cluster", "new", "my-pod", "--from", "dgx-h100")
    assert made.exit_code == 0, made.stderr
    target = isolated / "clusters" / "my-pod.yaml"
    assert target.is_file() and "# Copied from the built-in profile 'dgx-h100'" in target.read_text(encoding="utf-8")
    again = napkin("cluster", "new", "my-pod")
    assert again.exit_code == 1 and "already exists" in again.stderr
    target.write_text(target.read_text(encoding="utf-8").replace("400 Gbit/s", "400 Gb/s"), encoding="utf-8")
    checked = napkin("cluster", "validate")
    assert checked.exit_code == 1 and "nic_bandwidth" in checked.stderr and "ambiguous" in checked.stderr


def test_cli_edit_keeps_only_a_valid_edit(napkin: Run, isolated: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = isolated.parent / "editor.sh"
    script.write_text("#!/bin/sh\nsed -i 's/devices_per_node: 8/devices_per_node: 3/' \"$1\"\n", encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    result = napkin("cluster", "edit", "dgx-h100")
    assert result.exit_code == 1 and "must divide" in result.stderr
    assert "devices_per_node: 8" in (isolated / "clusters" / "dgx-h100.yaml").read_text(encoding="utf-8")


def test_shipped_schema_is_current(napkin: Run) -> None:
    shipped = Path(__file__).resolve().parent.parent / "clusters" / "schema.json"
    assert json.loads(shipped.read_text(encoding="utf-8")) == cluster.schema(), (
        "run: napkin cluster schema > clusters/schema.json"
    )


def test_a_cluster_and_the_hardware_it_is_built_from_may_both_be_given(napkin: Run) -> None:
    """--cluster dgx-h100 --hardware h100 says one thing twice (a DGX H100 is built from H100 SXMs): taken, as the
    cluster alone; a device the cluster is not built from is refused, naming both flags."""
    args = ["step", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "64", "--json"]
    both = napkin(*args, "--cluster", "dgx-h100", "--hardware", "h100")
    assert both.exit_code == 0, both.stderr
    assert json.loads(both.stdout) == json.loads(napkin(*args, "--cluster", "dgx-h100").stdout)
    other = napkin(*args, "--cluster", "dgx-h100", "--hardware", "a100")
    assert other.exit_code == 2
    assert "--cluster: dgx-h100 is built from 'h100-sxm', not the --hardware given ('a100-sxm-80gb')" in other.stderr
