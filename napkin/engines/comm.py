"""Collective communication time in the α–β form, with nccl-tests' algorithm and bus bandwidths.

Pure functions over a cluster's ``Fabric`` (plain floats); no printing, no files. Sizes follow
nccl-tests (``doc/PERFORMANCE.md``): ``S`` is the whole buffer (all-reduce: the tensor; all-gather:
the gathered output; reduce-scatter: the input; all-to-all: one rank's send buffer).

    algbw = S / t
    busbw = algbw × 2(n−1)/n   all-reduce
          = algbw × (n−1)/n    all-gather, reduce-scatter, all-to-all
          = algbw              broadcast, send/recv

    t = steps × α + traffic × S / B      (Thakur, Rabenseifner & Gropp 2005; Calculon's network model)

A group of ``n`` ranks is placed ``r`` per scale-up domain over ``N = n / r`` domains. The data flow is
pipelined (NCCL moves chunks through every link at once), so the bandwidth term is that of the slowest
stage — the *bottleneck* — not the sum:

* scale-up stage: per-rank traffic over the device's scale-up bandwidth (× efficiency);
* scale-out stage: the domain's egress over the group's share of the NICs, ``r × out_bandwidth_per_device``
  (a node's 8 NICs are shared by its 8 GPUs; a data-parallel group with one rank per node gets one
  GPU's share, because the other seven groups run at the same time).

Algorithms (NCCL's names, ``NVIDIA/nccl src/graph/tuning.cc``):

* ``ring``: all-reduce 2(n−1) steps and 2(n−1)/n·S per rank; reduce-scatter / all-gather n−1 steps and
  (n−1)/n·S; broadcast n−1 steps and S. Across domains a ring leaves each domain once per pass, so the
  domain's egress equals one rank's traffic.
* ``tree`` (all-reduce): a chain inside the domain (each rank sends S up and S down: 2·S) and a double
  binary tree across domains (2(N−1)/N·S egress, 2·⌈log2 N⌉ network hops).
* ``nvls`` (all-reduce, where the scale-up switch reduces, NVLink SHARP): S each way per rank, two
  switch latencies; across domains NCCL's NVLSTree: the network stage of ``tree``.
* ``pairwise`` (all-to-all): (r−1)/n·S over the scale-up link and (n−r)/n·S over the rank's NIC share,
  n−1 steps. ``p2p`` (send/recv): one hop, S bytes.

``algorithm=None`` picks the fastest the cluster supports. ``busbw`` can exceed a link's bandwidth only
for ``nvls`` (the switch does the reduction; nccl-tests issue #212) and for hierarchical all-reduces
whose network stage is counted over N domains but normalised over n ranks.
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import ClassVar, Final

from pydantic import ConfigDict, Field

from napkin import sources
from napkin.errors import UsageError
from napkin.io.yamlio import clean
from napkin.results.explain import Step, step
from napkin.results.result import Result
from napkin.systems.cluster import Cluster, Fabric
from napkin.units import format_bandwidth, format_bytes, format_bytes_si, format_duration


class Op(StrEnum):
    all_reduce = "all-reduce"
    reduce_scatter = "reduce-scatter"
    all_gather = "all-gather"
    all_to_all = "all-to-all"
    broadcast = "broadcast"
    send_recv = "send-recv"


class Algorithm(StrEnum):
    ring = "ring"
    tree = "tree"
    nvls = "nvls"
    pairwise = "pairwise"
    p2p = "p2p"


class BandwidthSource(StrEnum):
    model = "model"  # the cluster's links
    measured = "measured"  # the busbw saved by 'napkin bench <op> --save'


#: NCCL's protocols for ring collectives: (name, hop latency on NVLink / on the network as a fraction of
#: Simple's, share of the link bandwidth carrying data). Latencies from NVIDIA/nccl src/graph/tuning.cc
#: (hwLat, Ring: NVLink LL 0.6 / LL128 1.9 / Simple 3.4 µs; network 2.7 / 4.0 / 14 µs); LL sends a 4-byte
#: flag with every 4 bytes of data (half the bandwidth), LL128 a flag per 128-byte line (120/128).
PROTOCOLS: Final = (
    ("Simple", 1.0, 1.0, 1.0),
    ("LL128", 1.9 / 3.4, 4.0 / 14.0, 120 / 128),
    ("LL", 0.6 / 3.4, 2.7 / 14.0, 0.5),
)
#: NCCL's fixed cost of launching one collective, by protocol (tuning.cc baseLat: LL 6.8, LL128 14, Simple
#: 8.4 µs); Simple's is charged to every algorithm but send/recv.
BASE_LATENCY: Final = {"Simple": 8.4e-6, "LL128": 14.0e-6, "LL": 6.8e-6}

#: Which algorithms model which collective (the first that fits is tried first).
ALGORITHMS: Final[dict[Op, tuple[Algorithm, ...]]] = {
    Op.all_reduce: (Algorithm.ring, Algorithm.tree, Algorithm.nvls),
    Op.reduce_scatter: (Algorithm.ring,),
    Op.all_gather: (Algorithm.ring,),
    Op.all_to_all: (Algorithm.pairwise,),
    Op.broadcast: (Algorithm.ring,),
    Op.send_recv: (Algorithm.p2p,),
}


def bus_factor(op: Op | str, n: int) -> float:
    """busbw / algbw as nccl-tests defines it (doc/PERFORMANCE.md)."""
    op = Op(op)
    if op is Op.all_reduce:
        return 2.0 * (n - 1) / n
    if op in (Op.reduce_scatter, Op.all_gather, Op.all_to_all):
        return (n - 1) / n
    return 1.0


class CollectiveResult(Result):
    """One collective's modelled time; bandwidths in bytes/s (nccl-tests' algbw and busbw)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    title: ClassVar[str] = "Collective"
    headline: ClassVar[tuple[str, ...]] = ("op", "seconds", "busbw", "bottleneck")

    op: Op
    cluster: str
    bytes: float = Field(description="S, the nccl-tests size of the operation in bytes")
    group_size: int
    ranks_per_domain: int
    domains: int
    algorithm: Algorithm
    protocol: str = Field(default="Simple", description="NCCL protocol of the ring: Simple, LL128 or LL")
    seconds: float
    latency_seconds: float = Field(description="steps × per-hop latency")
    bandwidth_seconds: float = Field(description="traffic / bandwidth of the bottleneck stage")
    algbw: float = Field(description="S / t, bytes/s")
    busbw: float = Field(description="algbw × the nccl-tests bus factor, bytes/s")
    bottleneck: str = Field(description="the link whose stage takes longest")
    bottleneck_bandwidth: float = Field(description="that stage's bandwidth, bytes/s (after efficiency)")
    measured: bool = Field(default=False, description="bandwidth from a saved 'napkin bench' result")

    def heading(self) -> str:
        return f"{self.op} on {self.cluster}"

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("operation", f"{self.op}, {format_bytes(self.bytes)}"),
            ("group", f"{self.group_size:,} ranks = {self.ranks_per_domain} per domain × {self.domains:,} domain(s)"),
            ("algorithm", str(self.algorithm) + (f" ({self.protocol} protocol)" if self.protocol != "Simple" else "")),
            ("time", f"{format_duration(self.seconds)} (latency {format_duration(self.latency_seconds)})"),
            ("algbw", f"{format_bandwidth(self.algbw)}  (S / t)"),
            ("busbw", f"{format_bandwidth(self.busbw)}  (nccl-tests bus bandwidth)"),
            ("bottleneck", f"{self.bottleneck} at {format_bandwidth(self.bottleneck_bandwidth)}"),
        ]

    def caption(self) -> str | None:
        return "GB = 1e9 B; bandwidths in bytes/s per direction; --explain shows the derivation"


# ------------------------------------------------------------------------------------------ the model


def placement(group_size: int, fabric: Fabric, ranks_per_domain: int | None = None) -> tuple[int, int]:
    """(ranks per domain r, domains N) for a group; packed into as few domains as possible by default."""
    if group_size < 2:
        raise UsageError(f"gpus: a collective needs at least 2 ranks, got {group_size}", field="gpus")
    domain = fabric.domain_size
    r = min(group_size, domain) if ranks_per_domain is None else ranks_per_domain
    if r < 1 or r > domain:
        raise UsageError(
            f"ranks_per_node: {r} must be between 1 and the {domain} devices of one scale-up domain of {fabric.name}",
            field="ranks_per_node",
        )
    if group_size % r:
        raise UsageError(
            f"gpus: {group_size} is not a multiple of {r} ranks per node on {fabric.name} "
            "(give a multiple, or ranks_per_node)",
            field="gpus",
            also=("ranks_per_node",),
        )
    domains = group_size // r
    if domains > 1 and fabric.out_bandwidth_per_device <= 0:
        raise UsageError(
            f"gpus: {group_size} ranks at {r} per domain span {domains} domains, but {fabric.name} "
            f"has no scale-out network (one domain holds {domain} devices)",
            field="gpus",
        )
    return r, domains


def _plan(
    op: Op, nbytes: float, n: int, r: int, domains: int, f: Fabric, algorithm: Algorithm
) -> tuple[float, float, float, str, float, float, str]:
    """(seconds, latency s, bandwidth s, bottleneck, its bandwidth, steps, protocol) for one algorithm; inf if
    n/a."""
    inf = math.inf
    up_bw, out_bw = f.up_bandwidth, r * f.out_bandwidth_per_device
    hop = f.out_latency if domains > 1 else f.up_latency
    # (traffic over the scale-up link per rank, traffic over the group's NICs per domain)
    if algorithm is Algorithm.ring:
        if op is Op.all_reduce:
            traffic, steps = 2.0 * (n - 1) / n * nbytes, 2.0 * (n - 1)
        elif op in (Op.reduce_scatter, Op.all_gather):
            traffic, steps = (n - 1) / n * nbytes, float(n - 1)
        elif op is Op.broadcast:
            traffic, steps = nbytes, float(n - 1)
        else:
            return inf, inf, inf, "", 0.0, 0.0, ""
        up_t, out_t = (traffic if r > 1 else 0.0), (traffic if domains > 1 else 0.0)
        return min(
            (_ring_protocol(f, steps, up_t, out_t, up_bw, out_bw, domains, p) for p in PROTOCOLS),
            key=lambda plan: plan[0],
        )
    elif algorithm is Algorithm.tree:
        if op is not Op.all_reduce:
            return inf, inf, inf, "", 0.0, 0.0, ""
        levels = math.ceil(math.log2(domains)) if domains > 1 else 0
        steps = 2.0 * ((r - 1) + levels)
        latency = BASE_LATENCY["Simple"] + 2.0 * ((r - 1) * f.up_latency + levels * f.out_latency)
        up_t = 2.0 * nbytes if r > 1 else 0.0
        out_t = 2.0 * (domains - 1) / domains * nbytes if domains > 1 else 0.0
    elif algorithm is Algorithm.nvls:
        if op is not Op.all_reduce or f.nvls_bandwidth <= 0 or r < 2:
            return inf, inf, inf, "", 0.0, 0.0, ""
        levels = math.ceil(math.log2(domains)) if domains > 1 else 0
        steps = 2.0 + 2.0 * levels
        latency = BASE_LATENCY["Simple"] + 2.0 * f.nvls_latency + 2.0 * levels * f.out_latency
        up_t, up_bw = nbytes, f.nvls_bandwidth
        out_t = 2.0 * (domains - 1) / domains * nbytes if domains > 1 else 0.0
    elif algorithm is Algorithm.pairwise:
        if op is not Op.all_to_all:
            return inf, inf, inf, "", 0.0, 0.0, ""
        steps = float(n - 1)
        latency = BASE_LATENCY["Simple"] + steps * hop
        up_t = (r - 1) / n * nbytes
        out_t, out_bw = (n - r) / n * nbytes, f.out_bandwidth_per_device
    else:  # p2p
        if op is not Op.send_recv:
            return inf, inf, inf, "", 0.0, 0.0, ""
        steps, latency = 1.0, hop
        up_t = nbytes if domains == 1 else 0.0
        out_t, out_bw = (nbytes if domains > 1 else 0.0), f.out_bandwidth_per_device
    up_s = up_t / up_bw if up_t else 0.0
    out_s = out_t / out_bw if out_t else 0.0
    if out_s > up_s:
        name, bandwidth, seconds = f.out_name, out_bw, out_s
    else:
        name = f"{f.up_name} (in-network reduction)" if algorithm is Algorithm.nvls else f.up_name
        bandwidth, seconds = up_bw, up_s
    return latency + seconds, latency, seconds, name, bandwidth, steps, "Simple"


def _ring_protocol(
    f: Fabric,
    steps: float,
    up_t: float,
    out_t: float,
    up_bw: float,
    out_bw: float,
    domains: int,
    protocol: tuple[str, float, float, float],
) -> tuple[float, float, float, str, float, float, str]:
    """A ring with one of NCCL's protocols: shorter hops (LL, LL128) for less of the bandwidth."""
    name, up_lat, out_lat, share = protocol
    latency = BASE_LATENCY[name] + steps * (f.out_latency * out_lat if domains > 1 else f.up_latency * up_lat)
    up_s = up_t / (up_bw * share) if up_t else 0.0
    out_s = out_t / (out_bw * share) if out_t else 0.0
    if out_s > up_s:
        return latency + out_s, latency, out_s, f.out_name, out_bw * share, steps, name
    return latency + up_s, latency, up_s, f.up_name, up_bw * share, steps, name


def _check(op: Op, nbytes: float, n: int, algorithm: Algorithm | None) -> None:
    if not math.isfinite(nbytes) or nbytes <= 0:
        raise UsageError(f"bytes: {nbytes!r} must be a positive number of bytes", field="bytes")
    if op is Op.send_recv and n != 2:
        raise UsageError(f"gpus: send/recv is between 2 ranks, got {n}", field="gpus")
    if algorithm is not None and algorithm not in ALGORITHMS[op]:
        allowed = ", ".join(ALGORITHMS[op])
        raise UsageError(f"algorithm: {op} has no {algorithm} model; use one of: {allowed}", field="algorithm")


def collective_seconds(
    op: Op | str,
    nbytes: float,
    group_size: int,
    fabric: Fabric,
    *,
    ranks_per_domain: int | None = None,
    algorithm: Algorithm | str | None = None,
) -> float:
    """Seconds for one collective: the planner's fast path (plain floats, no result objects)."""
    return _best(Op(op), nbytes, group_size, fabric, ranks_per_domain, algorithm)[0]


def _best(
    op: Op, nbytes: float, n: int, fabric: Fabric, ranks_per_domain: int | None, algorithm: Algorithm | str | None
) -> tuple[float, float, float, str, float, float, str, Algorithm, int, int]:
    algo = Algorithm(algorithm) if algorithm is not None else None
    _check(op, nbytes, n, algo)
    r, domains = placement(n, fabric, ranks_per_domain)
    best: tuple[float, float, float, str, float, float, str, Algorithm, int, int] | None = None
    for candidate in (algo,) if algo is not None else ALGORITHMS[op]:
        plan = _plan(op, nbytes, n, r, domains, fabric, candidate)
        if best is None or plan[0] < best[0]:
            best = (*plan, candidate, r, domains)
    assert best is not None
    if not math.isfinite(best[0]):
        raise UsageError(
            f"algorithm: {fabric.name} has no in-network reduction for nvls at this placement; use ring or tree",
            field="algorithm",
        )
    return best


def collective_time(
    op: Op | str,
    nbytes: float,
    group_size: int,
    cluster: Cluster | Fabric,
    *,
    ranks_per_domain: int | None = None,
    algorithm: Algorithm | str | None = None,
    bus_bandwidth: float | None = None,
    bus_bandwidth_source: str = "measured",
) -> CollectiveResult:
    """The collective's time with algbw, busbw, the bottleneck link and the derivation.

    ``bus_bandwidth`` (bytes/s), when given, replaces the link model's bandwidth: t = steps × α + S ×
    bus factor / busbw — the nccl-tests definition solved for t — as used by ``--bandwidth measured``.
    """
    op = Op(op)
    fabric = cluster.fabric() if isinstance(cluster, Cluster) else cluster
    seconds, latency, band_s, bottleneck, bottleneck_bw, steps, protocol, algo, r, domains = _best(
        op, nbytes, group_size, fabric, ranks_per_domain, algorithm
    )
    n = group_size
    factor = bus_factor(op, n)
    measured = bus_bandwidth is not None
    if bus_bandwidth is not None:
        band_s = nbytes * factor / bus_bandwidth
        seconds, bottleneck, bottleneck_bw = latency + band_s, bus_bandwidth_source, bus_bandwidth
    algbw = nbytes / seconds
    derivation = _steps(
        op, nbytes, n, r, domains, fabric, algo, latency, steps, band_s, bottleneck, bottleneck_bw, seconds, measured
    )
    return CollectiveResult(
        op=op,
        cluster=fabric.name,
        bytes=nbytes,
        group_size=n,
        ranks_per_domain=r,
        domains=domains,
        algorithm=algo,
        protocol=protocol,
        seconds=seconds,
        latency_seconds=latency,
        bandwidth_seconds=band_s,
        algbw=algbw,
        busbw=algbw * factor,
        bottleneck=bottleneck,
        bottleneck_bandwidth=bottleneck_bw,
        measured=measured,
        steps=derivation,
    )


_TRAFFIC: Final = {
    (Op.all_reduce, Algorithm.ring): "2(n−1)/n · S",
    (Op.reduce_scatter, Algorithm.ring): "(n−1)/n · S",
    (Op.all_gather, Algorithm.ring): "(n−1)/n · S",
    (Op.broadcast, Algorithm.ring): "S",
    (Op.all_reduce, Algorithm.tree): "2·S in the domain; 2(N−1)/N · S across domains",
    (Op.all_reduce, Algorithm.nvls): "S each way per rank in the switch; 2(N−1)/N · S across domains",
    (Op.all_to_all, Algorithm.pairwise): "(r−1)/n · S in the domain; (n−r)/n · S per rank across",
    (Op.send_recv, Algorithm.p2p): "S",
}


def _steps(
    op: Op,
    nbytes: float,
    n: int,
    r: int,
    domains: int,
    f: Fabric,
    algo: Algorithm,
    latency: float,
    hops: float,
    band_s: float,
    bottleneck: str,
    bottleneck_bw: float,
    seconds: float,
    measured: bool,
) -> list[Step]:
    out_share = f.out_bandwidth_per_device
    place = step(
        "placement",
        "n = r × N (r ranks in each of N scale-up domains)",
        f"{n} = {r} × {domains}",
        f"{domains} domain(s) of {f.name}",
        sources.NCCL_TESTS_BUSBW,
    )
    links = [
        step(
            "scale-up bandwidth",
            "B_up = per-direction line rate × efficiency",
            f.up_name,
            format_bandwidth(f.up_bandwidth) + " per rank, per direction",
            sources.NCCL_EFFICIENCY,
        ),
    ]
    if algo is Algorithm.nvls:
        links.append(
            step(
                "in-switch reduction",
                "B_nvls = per-direction line rate × NVLS efficiency",
                f.up_name,
                format_bandwidth(f.nvls_bandwidth) + " algbw per rank",
                sources.NCCL_EFFICIENCY,
            )
        )
    if domains > 1:
        k = 1 if algo in (Algorithm.pairwise, Algorithm.p2p) else r  # each rank its own share, or the domain's
        links.append(
            step(
                "scale-out share",
                "B_out = NICs × NIC speed × efficiency / devices per node × ranks",
                f"{format_bandwidth(out_share)} per device × {k}",
                format_bandwidth(out_share * k) + " per direction",
                sources.CALCULON_NETWORK,
            )
        )
    traffic = _TRAFFIC[(op, algo)]
    band = step(
        "bandwidth term",
        f"t_bw = traffic / B_bottleneck, traffic = {traffic}",
        f"bottleneck {bottleneck} at {format_bandwidth(bottleneck_bw)}",
        format_duration(band_s),
        sources.NCCL_TESTS_BUSBW if measured else sources.THAKUR_ALPHA_BETA,
    )
    lat = step(
        "latency term",
        "t_α = base + steps × α (the protocol with the shortest time: Simple, LL128, LL)",
        f"{hops:g} steps",
        format_duration(latency),
        sources.NCCL_LATENCY,
    )
    factor = bus_factor(op, n)
    total = step(
        "time",
        "t = t_α + t_bw",
        f"{format_duration(latency)} + {format_duration(band_s)}",
        format_duration(seconds),
        sources.THAKUR_ALPHA_BETA,
    )
    bw = step(
        "algbw, busbw",
        "algbw = S / t; busbw = algbw × bus factor",
        f"{format_bytes_si(nbytes)} / {format_duration(seconds)}; × {factor:.4g}",
        f"{format_bandwidth(nbytes / seconds)}, {format_bandwidth(nbytes / seconds * factor)}",
        sources.NCCL_TESTS_BUSBW,
    )
    return [place, *links, band, lat, total, bw]


__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "BandwidthSource",
    "CollectiveResult",
    "Op",
    "bus_factor",
    "collective_seconds",
    "collective_time",
    "measured_busbw",
    "payload_bytes",
    "placement",
]


def measured_busbw(cluster: str, op: Op | str) -> tuple[float, str]:
    """(busbw in bytes/s, a label) saved by ``napkin bench <op> --save --cluster <cluster>``."""
    from napkin.systems.measurements import comm_measurement, measurements_path
    from napkin.units import parse_bandwidth

    entry = comm_measurement(cluster, str(Op(op)))
    if entry is None or entry.get("busbw") is None:
        raise UsageError(
            f"bandwidth measured: no saved {Op(op)} measurement for {cluster}; run "
            f"'napkin bench {Op(op)} --backend nccl --cluster {cluster} --save' on it first",
            field="bandwidth",
        )
    where_saved = f"{measurements_path()}: _comm.{cluster}.{Op(op)}.busbw"
    busbw = parse_bandwidth(entry["busbw"], where_saved)  # the command line's bounds: no NaN, inf or bool
    ranks, day = entry.get("world_size", "?"), entry.get("date", "?")
    where = (
        f"measured busbw ({clean(str(entry.get('backend', '?')))[:20]}, {clean(str(ranks))[:20]} ranks, "
        f"{clean(str(day))[:20]})"
    )
    return busbw, where


def payload_bytes(params: float, dtype: str) -> float:
    """Bytes of ``params`` elements stored as ``dtype`` (a 70B bf16 gradient: 1.4e11 B)."""
    from napkin.domain.choices import STORAGE_BYTES

    if dtype not in STORAGE_BYTES:
        raise UsageError(f"dtype: {dtype!r} is not one of: {', '.join(STORAGE_BYTES)}", field="dtype")
    return params * STORAGE_BYTES[dtype]
