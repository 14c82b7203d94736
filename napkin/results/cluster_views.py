"""What ``napkin cluster list|show`` answer, as results that render themselves (the profiles and their
lookup live in ``napkin.systems.cluster``)."""

from __future__ import annotations

from typing import Any, ClassVar

from napkin.results.result import ARBITRARY_TYPES, Result, TableResult, broken, fields
from napkin.systems.cluster import ClusterCatalog, LoadedCluster
from napkin.units import format_bandwidth, format_duration


class ClusterList(TableResult):
    """Every cluster profile napkin can see, and where it comes from."""

    model_config = ARBITRARY_TYPES
    title: ClassVar[str] = "Cluster profiles"

    catalog: ClusterCatalog

    @classmethod
    def of(cls, catalog: ClusterCatalog) -> ClusterList:
        warnings = [f"invalid cluster profile (ignored): {b.error}" for b in catalog.broken] + list(catalog.conflicts)
        notes = [
            f"the built-in {c.cluster.name} ({c.path}) is replaced by your cluster of the same name"
            for c in catalog.replaced
        ]
        return cls(catalog=catalog, warnings=warnings, notes=notes)

    def header(self) -> list[str]:
        return ["name", "device", "domain", "scale-up", "NICs/node", "origin"]

    def body(self) -> list[list[str]]:
        rows = []
        for loaded in self.catalog.visible():
            c, out = loaded.cluster, loaded.cluster.scale_out
            nics = f"{out.nics_per_node}×{format_bandwidth(out.nic_bandwidth)}" if out else "–"
            rows.append(
                [
                    c.name,
                    c.device,
                    str(c.scale_up.domain_size),
                    format_bandwidth(c.scale_up.bandwidth),
                    nics,
                    loaded.origin,
                ]
            )
        return rows

    def caption(self) -> str:
        return "bandwidths per device / per NIC, per direction, bytes/s"

    def to_json(self, explain: bool = False) -> Any:
        return {
            "clusters": [fields(c.cluster, origin=c.origin, path=c.path) for c in self.catalog.visible()],
            "shadowed": [{"name": c.cluster.name, "origin": c.origin, "path": c.path} for c in self.catalog.replaced],
            "conflicts": self.catalog.conflicts,
            "invalid": [broken(b) for b in self.catalog.broken],
        }


class ClusterSheet(Result):
    """Every field of one cluster profile, with units and sources."""

    model_config = ARBITRARY_TYPES

    loaded: LoadedCluster

    def heading(self) -> str:
        return self.loaded.cluster.display_name

    def rows(self) -> list[tuple[str, str]]:
        c = self.loaded.cluster
        up, out = c.scale_up, c.scale_out
        rows = [
            ("name", c.name),
            ("display name", c.display_name),
            ("device", c.device),
            ("devices per node", str(c.devices_per_node)),
            (
                "scale-up",
                f"{up.name}: {format_bandwidth(up.bandwidth)} per device per direction × "
                f"{up.efficiency:g}, {format_duration(up.latency)}/hop, domain of {up.domain_size}",
            ),
            (
                "in-network reduction",
                f"yes (efficiency {up.in_network_reduction.efficiency:g})" if up.in_network_reduction else "no",
            ),
        ]
        if out:
            rows.append(
                (
                    "scale-out",
                    f"{out.name}: {out.nics_per_node} × {format_bandwidth(out.nic_bandwidth)} "
                    f"({out.nic_bandwidth * 8 / 1e9:g} Gbit/s) per direction, "
                    f"{format_duration(out.latency)}/hop",
                )
            )
        rows += [(f"source {i + 1}", f"{s.title} [{i + 1}]") for i, s in enumerate(c.sources)]
        rows.append(("file", f"{self.loaded.path} ({self.loaded.origin})"))
        return rows

    def extras(self) -> list[Any]:
        from napkin.results import render

        return [render.links([s.url for s in self.loaded.cluster.sources])]

    def to_json(self, explain: bool = False) -> Any:
        return fields(self.loaded.cluster, origin=self.loaded.origin, path=self.loaded.path)
