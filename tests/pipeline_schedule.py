"""An event replay of Megatron-LM's pipeline schedules, to check ``napkin.engines.step.pipeline_bubble``.

The rank programs follow ``forward_backward_pipelining_with_interleaving`` in megatron/schedules.py as
published with the SC21 scripts (NVIDIA/Megatron-LM commit de7dc40f, 2021): warm-up forwards, then one
forward and one backward chunk per step, then the cool-down backwards; after each step one combined,
blocking exchange with both neighbours (``send_forward_backward_recv_forward_backward``). An exchange
starts when every peer has posted its side (NCCL point-to-point pairs sends and receives in order) and takes
one transfer time per tensor the rank sends (or receives, if more): they share the rank's link. With one
chunk per rank this is the 1F1B schedule.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple


class Op(NamedTuple):
    kind: str  # "F", "B" (compute) or "C" (exchange)
    chunk: int = 0
    sends: tuple[tuple[int, str], ...] = ()  # (peer, "act" | "grad")
    recvs: tuple[tuple[int, str], ...] = ()


def _chunk(microbatch: int, p: int, v: int, forward: bool) -> int:
    c = microbatch % (p * v) // p
    return c if forward else v - c - 1


def rank_program(r: int, p: int, v: int, m: int) -> list[Op]:
    """The operations rank ``r`` of ``p`` runs for ``m`` micro-batches and ``v`` chunks per rank."""
    total = m * v
    first, last = r == 0, r == p - 1
    all_warmup = m == p
    warmup = total if all_warmup else min((p - r - 1) * 2 + (v - 1) * p, total)
    remaining = total - warmup
    prev, nxt = (r - 1) % p, (r + 1) % p

    def first_virtual(c: int) -> bool:
        return first and c == 0

    def last_virtual(c: int) -> bool:
        return last and c == v - 1

    ops = [Op("C", recvs=() if first_virtual(0) else ((prev, "act"),))]
    for k in range(warmup):
        c = _chunk(k, p, v, True)
        ops.append(Op("F", c))
        recv_prev = not (first and _chunk(k + 1, p, v, True) == 0) and k != total - 1
        recvs = [(prev, "act")] if recv_prev else []
        if k == warmup - 1 and not all_warmup and not last:
            recvs.append((nxt, "grad"))
        ops.append(Op("C", sends=() if last_virtual(c) else ((nxt, "act"),), recvs=tuple(recvs)))
    for k in range(remaining):
        fc, bc = _chunk(k + warmup, p, v, True), _chunk(k, p, v, False)
        ops += [Op("F", fc), Op("B", bc)]
        recv_prev = not (first and _chunk(k + warmup - (p - 1), p, v, True) == v - 1) and k != remaining - 1
        recv_next = not (last and _chunk(k - (p - 1), p, v, False) == 0)
        sends = ([(nxt, "act")] if not last_virtual(fc) else []) + ([(prev, "grad")] if not first_virtual(bc) else [])
        recvs = ([(prev, "act")] if recv_prev else []) + ([(nxt, "grad")] if recv_next else [])
        ops.append(Op("C", sends=tuple(sends), recvs=tuple(recvs)))
    if all_warmup and not last:
        ops.append(Op("C", recvs=((nxt, "grad"),)))
    for k in range(remaining, total):
        bc = _chunk(k, p, v, False)
        ops.append(Op("B", bc))
        recv_next = not (last and _chunk(k + 1, p, v, False) == v - 1) and k != total - 1
        ops.append(
            Op("C", sends=() if first_virtual(bc) else ((prev, "grad"),), recvs=((nxt, "grad"),) if recv_next else ())
        )
    return ops


def makespan(
    p: int,
    v: int,
    m: int,
    forward: float,
    backward: float,
    last_forward: float = 0.0,
    last_backward: float = 0.0,
    transfer: float = 0.0,
) -> float:
    """Seconds until every rank is done. ``forward``/``backward``: one micro-batch through all of a rank's
    chunks; ``last_*``: extra work of the last virtual stage (logits, loss); ``transfer``: one send."""
    programs = [rank_program(r, p, v, m) for r in range(p)]
    pc, clock, posted = [0] * p, [0.0] * p, [False] * p
    send_posts: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    recv_posts: dict[tuple[int, int, str], list[float]] = defaultdict(list)
    moved = True
    while moved:
        moved = False
        for r in range(p):
            while pc[r] < len(programs[r]):
                op = programs[r][pc[r]]
                if op.kind != "C":
                    tail = r == p - 1 and op.chunk == v - 1  # the last virtual stage: logits and loss
                    extra = (last_forward if op.kind == "F" else last_backward) if tail else 0.0
                    clock[r] += (forward if op.kind == "F" else backward) / v + extra
                    pc[r] += 1
                    moved = True
                    continue
                if not posted[r]:
                    for peer, what in op.sends:
                        send_posts[(r, peer, what)].append(clock[r])
                    for peer, what in op.recvs:
                        recv_posts[(peer, r, what)].append(clock[r])
                    posted[r] = moved = True
                finish = clock[r]
                pairs = [(send_posts, recv_posts, (r, peer, w)) for peer, w in op.sends]
                pairs += [(recv_posts, send_posts, (peer, r, w)) for peer, w in op.recvs]
                ready = True
                for mine, theirs, key in pairs:
                    i = len(mine[key]) - 1
                    if len(theirs[key]) <= i:
                        ready = False
                        break
                    finish = max(finish, mine[key][i], theirs[key][i])
                if not ready:
                    break
                # the rank's link carries its sends (and its receives) one after another
                clock[r], posted[r] = finish + transfer * max(len(op.sends), len(op.recvs)), False
                pc[r] += 1
                moved = True
    if any(pc[r] < len(programs[r]) for r in range(p)):
        raise RuntimeError(f"the schedule deadlocked (p={p}, v={v}, m={m})")
    return max(clock)
