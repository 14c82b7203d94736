"""SGLang 0.4's admission check (``traffic.peak_fits``) without listing every running sequence at each check.

With one token per decode step, a decoding sequence that took its first decode step at iteration ``start + 1``
has, at iteration ``it``, ``left − (it − 1 − start)`` output tokens left and ``prompt + 1 + (it − 1 − start)`` KV
tokens held: (K − it, P + it) with K = left + start + 1 and P = prompt − start fixed. Sorting by (tokens left,
tokens held) is sorting by (K, P), which no step changes, so the decoding sequences stay in one sorted list,
changed only when one starts or stops decoding. The few others (prompts being filled, this step's new prompts, the
candidate) are merged in at each check.

``peak_fits``'s i-th check, free + H_i − l_{i+1} · (n − i) > 0, is then evaluated at any i from prefix sums. A
range of checks [a, b) all pass where free + H_a − l_b · (n − a) > 2 (tokens left grow along the sorted order
and KV held is never negative, so every check in the range is at least that; the margin covers the float
rounding of ``free``, the other terms being whole numbers), so most ranges are passed without visiting their
checks; the others are split, down to a few checks evaluated exactly as ``peak_fits`` does. The answer is
``peak_fits``'s, bit for bit (tests/test_sglang_scheduler.py compares them)."""

from __future__ import annotations

from bisect import bisect_left
from itertools import accumulate

LEAF = 4  # checks evaluated one by one below this range length


class Decoding:
    """The decoding sequences, sorted by their fixed keys (K, P, request)."""

    __slots__ = ("keys", "ks", "pp", "ps")

    def __init__(self) -> None:
        self.keys: list[tuple[int, int, int]] = []
        self.ks: list[int] = []
        self.ps: list[int] = []
        self.pp: list[int] | None = None  # prefix sums of ps, rebuilt after a change

    def add(self, key: tuple[int, int, int]) -> None:
        i = bisect_left(self.keys, key)
        self.keys.insert(i, key)
        self.ks.insert(i, key[0])
        self.ps.insert(i, key[1])
        self.pp = None

    def remove(self, key: tuple[int, int, int]) -> None:
        i = bisect_left(self.keys, key)
        del self.keys[i], self.ks[i], self.ps[i]
        self.pp = None

    def fits(self, it: int, others: list[tuple[int, int]], free: float) -> bool | None:
        """``peak_fits`` of the decoding sequences at iteration ``it`` and ``others`` ((tokens left ≥ 1, KV tokens
        held) each), or None where a decoding sequence has no token left (``peak_fits`` would drop it)."""
        ks, keys = self.ks, self.keys
        if ks and ks[0] <= it:
            return None
        if self.pp is None:
            self.pp = list(accumulate(self.ps, initial=0))
        pp = self.pp
        others = sorted(others)
        s, m = len(others), len(ks)
        n = m + s
        # merged index of each of the others, and the KV they hold before it
        at = [bisect_left(keys, (lo + it, h - it)) + t for t, (lo, h) in enumerate(others)]
        sh = list(accumulate((h for _, h in others), initial=0))

        def left_at(i: int) -> int:
            t = bisect_left(at, i)
            if t < s and at[t] == i:
                return others[t][0]
            return ks[i - t] - it

        def held_before(i: int) -> int:
            t = bisect_left(at, i)
            j = i - t
            return pp[j] + it * j + sh[t]

        def passes(a: int, b: int) -> bool:
            if free + held_before(a) - left_at(min(b, n - 1)) * (n - a) > 2:
                return True
            if b - a > LEAF:
                mid = (a + b) // 2
                return passes(a, mid) and passes(mid, b)
            for i in range(a, b):
                steps = left_at(i + 1) if i + 1 < n else left_at(i)
                if free + held_before(i) - steps * (n - i) <= 0:
                    return False
            return True

        # ranges doubling from the first check: a refusal is mostly at the first checks, and the bound of a short
        # range near the start is tight where one from the start to the end is not (inlined: most ranges pass)
        lo, hi, t = 0, 1, 0
        while lo < n:
            while t < s and at[t] < lo:
                t += 1
            b = hi if hi < n else n
            e, u = (b if b < n else n - 1), t
            while u < s and at[u] < e:
                u += 1
            end = others[u][0] if u < s and at[u] == e else ks[e - u] - it
            if free + pp[lo - t] + it * (lo - t) + sh[t] - end * (n - lo) <= 2 and not passes(lo, b):
                return False
            lo, hi = hi, 2 * hi
        return True
