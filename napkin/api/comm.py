"""Collective-communication questions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from napkin import units
from napkin.api.inputs import choice, optional, parse, said, textual
from napkin.errors import UsageError

if TYPE_CHECKING:  # imported where used: a command pays only for the objects it builds (startup time)
    from napkin.engines.comm import CollectiveResult

from napkin.api.inputs import Number


def collective(
    op: str = "all-reduce",
    *,
    bytes: Number | None = None,
    params: Number | None = None,
    dtype: str = "bf16",
    gpus: Number | None = None,
    cluster: str | None = None,
    cluster_file: str | Path | None = None,
    algorithm: str | None = None,
    ranks_per_node: Number | None = None,
    bandwidth: str = "model",
) -> CollectiveResult:
    """Time of one collective (``op``: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast,
    send-recv) of ``bytes`` (or ``params`` elements of ``dtype``) over ``gpus`` ranks (default 8; 2 for
    send-recv) of ``cluster`` (default: the cluster built from the default device, $NAPKIN_HARDWARE else h100, as
    ``step`` takes it);
    ``bandwidth="measured"`` uses the busbw saved by ``napkin bench <op> --save``."""
    from napkin.engines import comm
    from napkin.systems.cluster import resolve

    if cluster is not None:
        textual(cluster, "cluster", "a cluster name such as 'dgx-h100'")
    if cluster_file is not None:
        textual(cluster_file, "cluster_file", "a path to a cluster YAML file", path=True)
    operation = choice(comm.Op, op, "op")
    if (bytes is None) == (params is None):
        raise UsageError("give bytes or params (with dtype), one of them", field="bytes", also=("params", "dtype"))
    size = parse(units.parse_bytes, bytes, "bytes") if bytes is not None else None
    if size is None:
        size = comm.payload_bytes(parse(units.parse_count, params, "params"), str(dtype).lower())
    n = parse(units.parse_int, gpus, "gpus") if gpus is not None else 2 if operation is comm.Op.send_recv else 8
    ranks = optional(units.parse_int, ranks_per_node, "ranks_per_node")
    algo = None if algorithm in (None, "auto") else choice(comm.Algorithm, algorithm, "algorithm")
    source = choice(comm.BandwidthSource, bandwidth, "bandwidth")
    if cluster is None and cluster_file is None:  # as step takes it: the cluster built from the default device
        from napkin.api.system_inputs import get_cluster

        chosen = get_cluster()[0]
    else:
        chosen = resolve(cluster, cluster_file).cluster
    busbw, label = None, "measured"
    if source is comm.BandwidthSource.measured:
        busbw, label = comm.measured_busbw(chosen.name, operation)
    result = comm.collective_time(
        operation,
        size,
        n,
        chosen,
        ranks_per_domain=ranks,
        algorithm=algo,
        bus_bandwidth=busbw,
        bus_bandwidth_source=label,
    )
    return said(result, chosen)
