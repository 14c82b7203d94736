"""``napkin comm …`` (collective times) and ``napkin cluster …`` (cluster profiles)."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from napkin.cli.common import ExplainOpt, JsonOpt, boundary, echo_json, fail, note, run, say
from napkin.cli.options import deprecated
from napkin.errors import ProfileError, UsageError
from napkin.io.yamlio import clean

comm_app = typer.Typer(
    help="Collective communication time on a cluster (α–β model, nccl-tests bandwidths).", no_args_is_help=True
)
cluster_app = typer.Typer(help="Cluster profiles: list, inspect, copy, edit and validate them.", no_args_is_help=True)


BytesOpt = Annotated[str | None, typer.Option("--bytes", metavar="SIZE", help="S: the buffer, e.g. 140GB or 1GiB.")]
ParamsOpt = Annotated[
    str | None, typer.Option("--params", "-N", metavar="COUNT", help="Instead of --bytes: elements, e.g. 70B.")
]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Element type with --params (bf16 = 2 B, fp32 = 4 B).")]
GpusOpt = Annotated[
    str | None, typer.Option("--gpus", "-G", metavar="N", help="n: ranks in the group (default 8; send-recv 2).")
]
#: -g was comm's own short flag for --gpus; every other command says -G (kept one release, with a note)
OLD_GPUS = deprecated("-g", "gpus", "-G (--gpus)")
OldGpusOpt = Annotated[str | None, typer.Option("-g", hidden=True)]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        "-c",
        metavar="NAME",
        help="Cluster profile (see 'napkin cluster list'); default the one built from $NAPKIN_HARDWARE, else h100.",
    ),
]
ClusterFileOpt = Annotated[
    Path | None, typer.Option("--cluster-file", metavar="PATH", help="Use this cluster YAML file instead.")
]
AlgorithmOpt = Annotated[
    str,
    typer.Option(
        "--algorithm",
        "-a",
        metavar="auto|ring|tree|nvls|pairwise|p2p",
        help="auto picks the fastest the cluster supports.",
    ),
]
RanksOpt = Annotated[
    str | None,
    typer.Option(
        "--ranks-per-node",
        metavar="R",
        help="Ranks of the group per scale-up domain (default: packed, min(n, domain size)); "
        "1 = one rank per node, as a data-parallel group beside TP=8.",
    ),
]
BandwidthOpt = Annotated[
    str,
    typer.Option(
        "--bandwidth",
        metavar="model|measured",
        help="model: the cluster's links; measured: busbw saved by 'napkin bench … --save'.",
    ),
]


def _register(op: str, doc: str) -> None:
    def command(
        nbytes: BytesOpt = None,
        params: ParamsOpt = None,
        dtype: DtypeOpt = "bf16",
        gpus: GpusOpt = None,
        cluster: ClusterOpt = None,
        cluster_file: ClusterFileOpt = None,
        algorithm: AlgorithmOpt = "auto",
        ranks_per_node: RanksOpt = None,
        bandwidth: BandwidthOpt = "model",
        as_json: JsonOpt = False,
        explain: ExplainOpt = False,
        deprecated_g: OldGpusOpt = None,
    ) -> None:
        from napkin import api

        run(
            api.collective,
            {
                "op": op,
                "bytes": nbytes,
                "params": params,
                "dtype": dtype,
                "gpus": gpus,
                "cluster": cluster,
                "cluster_file": cluster_file,
                "algorithm": algorithm,
                "ranks_per_node": ranks_per_node,
                "bandwidth": bandwidth,
                "json": as_json,
                "explain": explain,
                OLD_GPUS.name: deprecated_g,
            },
        )

    command.__doc__ = doc
    comm_app.command(op)(command)


for _op, _doc in (
    ("all-reduce", "Time to all-reduce S bytes over n ranks (data-parallel gradients, tensor-parallel activations)."),
    ("reduce-scatter", "Time to reduce-scatter S bytes (the input) over n ranks (ZeRO/FSDP gradients)."),
    ("all-gather", "Time to all-gather S bytes (the output) over n ranks (ZeRO-3/FSDP parameters)."),
    ("all-to-all", "Time for an all-to-all of S bytes per rank (MoE expert parallelism)."),
    ("broadcast", "Time to broadcast S bytes from one rank to n."),
    ("send-recv", "Time to send S bytes between 2 ranks (pipeline stages); --ranks-per-node 1 crosses nodes."),
):
    _register(_op, _doc)


# ------------------------------------------------------------------------------------------ cluster

NameArg = Annotated[str, typer.Argument(help="Cluster name or alias (see 'napkin cluster list').")]


@cluster_app.command("list")
def cluster_list(as_json: JsonOpt = False) -> None:
    """Every cluster profile napkin can see, and where it comes from."""
    from napkin import api

    run(api.cluster_list, {"json": as_json})


@cluster_app.command("show")
def cluster_show(name: NameArg, as_json: JsonOpt = False) -> None:
    """Every field of one cluster profile, with units and sources."""
    from napkin import api

    run(api.cluster_sheet, {"name": name, "json": as_json})


@cluster_app.command("validate")
def cluster_validate(
    paths: Annotated[list[Path] | None, typer.Argument(help="Files to check (default: every cluster found).")] = None,
) -> None:
    """Check cluster files; each problem as file:line: field: message. Exit 1 if any is invalid."""
    from napkin.errors import NapkinError
    from napkin.systems.cluster import load_catalog, load_file

    problems: list[str] = []
    loaded = []
    if paths:
        for path in paths:
            try:
                loaded.append(load_file(path))  # a regular file of bounded size, as every file napkin reads
            except ProfileError as exc:
                problems += exc.problems
            except NapkinError as exc:
                problems.append(str(exc).removeprefix("cluster_file: "))
    else:
        catalog = load_catalog()
        loaded = catalog.clusters + catalog.replaced
        for broken in catalog.broken:
            problems += list(broken.problems) or [broken.error]
        problems += catalog.conflicts
    for found in loaded:
        device = _device_problem(found)
        if device is None:
            say(f"ok  {clean(found.path)}")
        else:
            problems.append(device)
    for line in problems:
        say(clean(line), err=True)
    if problems:
        fail(f"{len(problems)} problem(s)", 1)


def _device_problem(found: Any) -> str | None:
    """Why ``found``'s ``device`` names no hardware profile napkin can see, if it does not."""
    from napkin.errors import NapkinError
    from napkin.systems.profiles import find as find_hardware

    try:
        find_hardware(found.cluster.device, what="device")
    except NapkinError as exc:
        return f"{found.path}: {exc}"
    return None


@cluster_app.command("new")
def cluster_new(
    name: Annotated[str, typer.Argument(help="Name of the new cluster (lower-case, e.g. my-cluster).")],
    source: Annotated[str, typer.Option("--from", metavar="NAME", help="Cluster to copy.")] = "dgx-h100",
    force: Annotated[
        bool, typer.Option("--force", help="Replace your existing cluster of that name, or take a built-in's name.")
    ] = False,
) -> None:
    """Copy a cluster profile into your user directory for editing (never overwrites without --force)."""
    from napkin.io.files import write_atomic
    from napkin.systems.cluster import copy_text, find, is_builtin_name, parse_cluster, user_cluster_dir
    from napkin.systems.profiles import SLUG_RULE, is_slug

    with boundary():
        if not is_slug(name):
            raise UsageError(f"NAME: {name!r}: {SLUG_RULE}")
        builtin = is_builtin_name(name)
        if builtin is not None and not force:
            raise UsageError(
                f"NAME: {name!r} is the built-in cluster {builtin}'s name; your cluster would replace it in every "
                "command. Pick another name, or pass --force to replace it (every command then says so)"
            )
        loaded = find(source, what="source")
        text = copy_text(loaded, name, date.today().isoformat())
        target = user_cluster_dir() / f"{name}.yaml"
        parse_cluster(text, str(target))
        write_atomic(target, text, overwrite=force)
    say(str(target))
    note(f"created {target} from {loaded.cluster.name}; edit it with 'napkin cluster edit {name}'")


@cluster_app.command("edit")
def cluster_edit(
    name: NameArg,
    discard: Annotated[
        bool, typer.Option("--discard", help="Delete your unsaved draft of this cluster instead of editing.")
    ] = False,
) -> None:
    """Open your copy of a cluster in $EDITOR (creating it if needed); keep it only if it validates."""
    from napkin.cli.hardware_cmds import edit_profile
    from napkin.systems import profiles
    from napkin.systems.cluster import CLUSTERS, schema

    edit_profile(CLUSTERS, name, discard, False, lambda n: profiles.find_in(CLUSTERS, n, what="name"), schema)


@cluster_app.command("schema")
def cluster_schema() -> None:
    """Print the JSON Schema of a cluster file (for editors: yaml-language-server)."""
    from napkin.systems.cluster import schema

    echo_json(schema())


__all__ = ["cluster_app", "comm_app"]
