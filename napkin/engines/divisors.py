"""Divisors of the counts napkin reads (up to 2^53) in milliseconds, and powers of two: the degrees the layout
planner (``napkin.engines.planner``) tries."""

from __future__ import annotations

import math
from typing import Final

#: Miller-Rabin witnesses that decide primality of every n below 3.3e24, so of every count napkin reads (2^53):
#: the first twelve primes (Sorenson & Webster, "Strong pseudoprimes to twelve prime bases", Math. Comp. 2017).
_WITNESSES: Final = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    for p in _WITNESSES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in _WITNESSES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _factor(n: int) -> int:
    """A non-trivial factor of the composite ``n`` (no factor below 17): Pollard's rho with Floyd's cycle finding,
    about n^(1/4) steps (some ten thousand at 2^53)."""
    c = 1
    while True:
        x = y = 2
        d = 1
        while d == 1:
            x = (x * x + c) % n
            y = (y * y + c) % n
            y = (y * y + c) % n
            d = math.gcd(abs(x - y), n)
        if d != n:
            return d
        c += 1


def divisors(n: int, limit: int | None = None) -> list[int]:
    """The divisors of ``n`` (at most ``limit``), ascending. ``n`` is a count of at most 2^53 (``units.parse_int``),
    so it is factorised (trial division by small primes, then Miller-Rabin and Pollard's rho: milliseconds)
    instead of trying every number up to it (minutes at 10^9, never ending at 2^53)."""
    primes: dict[int, int] = {}
    for p in (2, 3, 5, 7, 11, 13):
        while n % p == 0:
            primes[p], n = primes.get(p, 0) + 1, n // p
    stack = [n] if n > 1 else []
    while stack:
        m = stack.pop()
        if _is_prime(m):
            primes[m] = primes.get(m, 0) + 1
        else:
            d = _factor(m)
            stack += [d, m // d]
    found = [1]
    for p, e in primes.items():
        found = [d * p**k for d in found for k in range(e + 1) if limit is None or d * p**k <= limit]
    return sorted(found)


def powers_of_two(limit: int) -> list[int]:
    out, k = [], 1
    while k <= limit:
        out.append(k)
        k *= 2
    return out


__all__ = ["divisors", "powers_of_two"]
