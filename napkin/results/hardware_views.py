"""What ``napkin hardware list|show|compare`` answer, as results that render themselves.

The profiles and their lookup live in ``napkin.systems.profiles``; this module only shapes them into tables and
JSON (the same ``Result`` path as every other command).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from napkin.domain.choices import Dtype
from napkin.results.result import ARBITRARY_TYPES, Result, TableResult, catalog_json, catalog_messages, fields
from napkin.systems.profiles import Catalog, HardwareProfile, LoadedProfile
from napkin.units import format_bandwidth, format_bytes, format_bytes_si, format_power, format_rate


class HardwareList(TableResult):
    """Every profile napkin can see, where it comes from, and any invalid files."""

    model_config = ARBITRARY_TYPES
    title: ClassVar[str] = "Hardware profiles"

    catalog: Catalog[HardwareProfile]

    def header(self) -> list[str]:
        return ["name", "aliases", "bf16 dense", "memory", "bandwidth", "power", "origin"]

    def body(self) -> list[list[str]]:
        rows = []
        for loaded in self.catalog.visible():
            p = loaded.profile
            bf16 = p.peak_flops.get(Dtype.bf16)
            rows.append(
                [
                    p.name,
                    ", ".join(p.aliases),
                    format_rate(bf16) if bf16 else "–",
                    format_bytes_si(p.memory),
                    format_bandwidth(p.memory_bandwidth),
                    format_power(p.power) if p.power else "–",
                    loaded.origin,
                ]
            )
        rows += [[Path(b.path).stem, "", "", "", "", "", f"{b.origin} (INVALID)"] for b in self.catalog.broken]
        return rows

    def caption(self) -> str:
        return "peaks are dense (no 2:4 sparsity); GB = 1e9 B, GiB = 2^30 B"

    def secondary(self) -> tuple[int, ...]:
        return (1, 5, 6)  # aliases, power, origin: on a narrow terminal origin goes first, then power

    @classmethod
    def of(cls, catalog: Catalog[HardwareProfile]) -> HardwareList:
        """The list, with invalid files and names claimed twice as warnings (never silent) and replaced
        built-ins as notes."""
        return cls(catalog=catalog, **catalog_messages(catalog))

    def to_json(self, explain: bool = False) -> Any:
        return catalog_json(self.catalog, "profiles")


class HardwareSheet(Result):
    """Every field of one profile, with units, ridge points and sources."""

    model_config = ARBITRARY_TYPES

    loaded: LoadedProfile

    def heading(self) -> str:
        return self.loaded.profile.display_name

    def rows(self) -> list[tuple[str, str]]:
        p = self.loaded.profile
        link = f", {format_bandwidth(p.interconnect_bandwidth)}" if p.interconnect_bandwidth else ""
        rows = [
            ("name", p.name),
            ("display name", p.display_name),
            ("vendor", p.vendor),
            ("aliases", ", ".join(p.aliases) or "–"),
            ("form factor", p.form_factor or "–"),
            ("memory", format_bytes(p.memory)),
            ("memory bandwidth", format_bandwidth(p.memory_bandwidth)),
            ("board power", format_power(p.power) if p.power else "–"),
            ("interconnect", f"{p.interconnect or '–'}{link}"),
            ("host link", f"{format_bandwidth(p.host_link_bandwidth)} each way" if p.host_link_bandwidth else "–"),
        ]
        if p.memory_usable:
            rows.append(("memory (reported)", f"{format_bytes(p.memory_usable)} (what torch reports)"))
        for dtype, peak in p.peak_flops.items():
            unit = format_rate(peak).replace("FLOP/s", "OP/s") if dtype is Dtype.int8 else format_rate(peak)
            per_byte = "OP/B" if dtype is Dtype.int8 else "FLOP/B"
            rows.append((f"peak {dtype} (dense)", f"{unit}  ridge {peak / p.memory_bandwidth:,.0f} {per_byte}"))
        for dtype, m in p.measured.items():
            rows.append((f"measured {dtype}", f"{format_rate(m.flops_per_second)} ({m.date}, {m.device}, {m.size})"))
        if p.price_per_hour:
            rows.append(("price", f"${p.price_per_hour:g} per hour"))
        rows += [("source", f"{s.title} [{n}]") for n, s in enumerate(p.sources, 1)]
        if p.notes:
            rows.append(("notes", p.notes))
        rows.append(("file", f"{self.loaded.path} ({self.loaded.origin})"))
        return rows

    def extras(self) -> list[Any]:
        from napkin.results import render

        return [render.links([s.url for s in self.loaded.profile.sources])]

    def to_json(self, explain: bool = False) -> Any:
        return fields(self.loaded.profile, origin=self.loaded.origin, path=self.loaded.path)


class HardwareComparison(TableResult):
    """Profiles side by side, with the ridge point (dense peak / bandwidth) at one dtype."""

    title: ClassVar[str] = "Hardware comparison"

    profiles: list[HardwareProfile]
    dtype: Dtype

    def ridge(self, p: HardwareProfile) -> float | None:
        return p.ridge_point(self.dtype) if self.dtype in p.peak_flops else None

    def header(self) -> list[str]:
        return ["", *(p.name for p in self.profiles)]

    def body(self) -> list[list[str]]:
        ps = self.profiles

        def peak(p: HardwareProfile, d: Dtype) -> str:
            return format_rate(p.peak_flops[d]) if d in p.peak_flops else "–"

        rows = [
            ["memory", *(format_bytes(p.memory) for p in ps)],
            ["bandwidth", *(format_bandwidth(p.memory_bandwidth) for p in ps)],
            ["power", *(format_power(p.power) if p.power else "–" for p in ps)],
            [
                "interconnect",
                *(format_bandwidth(p.interconnect_bandwidth) if p.interconnect_bandwidth else "–" for p in ps),
            ],
        ]
        rows += [[f"{d} dense", *(peak(p, d) for p in ps)] for d in Dtype if any(d in p.peak_flops for p in ps)]
        rows.append(
            [f"ridge ({self.dtype})", *(f"{v:,.0f} FLOP/B" if (v := self.ridge(p)) is not None else "–" for p in ps)]
        )
        return rows

    def caption(self) -> str:
        return "ridge point = dense peak / memory bandwidth: kernels below it are memory-bound"

    def renderables(self) -> list[Any]:
        """One table, or where the terminal is too narrow for every profile at once, one table per group that fits
        (each with the row labels), the caption under the last."""
        from napkin.results import render

        header, body = self.header(), self.body()
        groups = render.column_groups(header, body, render.width())
        if len(groups) == 1:
            return super().renderables()
        return [
            render.grid(
                f"{self.heading()} ({k}/{len(groups)})",
                [header[0], *(header[i] for i in group)],
                [[row[0], *(row[i] for i in group)] for row in body],
                caption=self.caption() if k == len(groups) else None,
            )
            for k, group in enumerate(groups, 1)
        ]

    def to_json(self, explain: bool = False) -> Any:
        return [{**fields(p), "ridge_point": self.ridge(p)} for p in self.profiles]
