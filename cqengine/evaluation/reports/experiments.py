"""The paper's tables and figures: which runs each needs, and the numbers it makes of them.

- table2: RI, MHI, OI and SAP-MHI x Uniform, Skew, InverSkew x Term Dialogue, Bloom filters.
- piggyback (Figure 3): MHI's saving over RI as the announcement piggybacks k = 0..10 ids.
- synopsis (Figures 4, 5): SAP-MHI with K sampled popular terms against MHI: load
  percentiles and reductions in queries and bytes per document, on the second half.
- breakdown (Figure 6): SAP-MHI with piggybacking over RI, split into MHI, sampling and
  piggybacking, on the second half.

Every number here is computed from runs' measurements (cqengine.evaluation.passes.runs), which
come from the ring's ledger; "reduction of B over A" is 100 * (1 - B / A).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from cqengine.evaluation import EvaluationError
from cqengine.evaluation.passes.runs import IndexSpec, RunResult, RunSpec, percentiles
from cqengine.evaluation.reports import paper
from cqengine.evaluation.setup.scale import Scale

WORKLOADS = ("uniform", "skew", "inverskew")
LABELS = {"ri": "RI", "mhi": "MHI", "oi": "OI", "sap-mhi": "SAP-MHI"}
RESOLUTIONS = ("td", "bf")


@dataclass
class Plan:
    """The scale and the sweeps: the paper's, or shrunk for a small corpus (--quick)."""

    scale: Scale
    synopsis_ks: tuple[int, ...] = paper.SYNOPSIS_KS
    synopsis_k: int = 1000  # SAP-MHI's K in table2 and breakdown (Figure 6's)
    piggybacks: tuple[int, ...] = tuple(range(11))
    piggyback_workload: str = "skew"
    breakdown_piggyback: int = 10

    @classmethod
    def scaled(cls, scale: Scale, vocabulary: int) -> Plan:
        """K in proportion to the vocabulary, as the paper's K is to its 46,654 terms."""
        ratio = vocabulary / paper.CORPUS["vocabulary"]
        ks = tuple(sorted({max(1, round(k * ratio)) for k in paper.SYNOPSIS_KS}))
        return cls(scale, synopsis_ks=ks, synopsis_k=max(1, round(1000 * ratio)))

    def to_json(self) -> dict:
        return asdict(self)


def reduction(base: float, new: float) -> float | None:
    """Percent by which `new` is below `base`."""
    return 100.0 * (1.0 - new / base) if base else None


def spec(
    strategy: str,
    workload: str,
    resolution: str,
    plan: Plan,
    k: int = 0,
    documents: str = "all",
    synopsis_k: int | None = None,
) -> RunSpec:
    sk = (synopsis_k or plan.synopsis_k) if strategy == "sap-mhi" else 0
    return RunSpec(IndexSpec(strategy, workload, sk), resolution, k, documents)


def point(
    results: dict[RunSpec, RunResult],
    plan: Plan,
    strategy: str,
    workload: str,
    k: int = 0,
    documents: str = "all",
    synopsis_k: int | None = None,
) -> dict:
    """One strategy's numbers on one workload: both resolution methods' runs together."""
    runs = {
        r: results[spec(strategy, workload, r, plan, k, documents, synopsis_k)] for r in RESOLUTIONS
    }
    td, bf = (runs[r].measure(documents) for r in RESOLUTIONS)
    if td["queries_per_doc"] != bf["queries_per_doc"]:  # resolution starts after pruning
        raise EvaluationError(f"{strategy}/{workload}: TD and BF runs presented different queries")
    return {
        "load": percentiles(runs["td"].load),
        "queries_per_doc": td["queries_per_doc"],
        "td_bytes_per_doc": td["resolution_bytes_per_doc"],
        "bf_bytes_per_doc": bf["resolution_bytes_per_doc"],
        "td_messages_per_doc": td["resolution_messages_per_doc"],
        "bf_messages_per_doc": bf["resolution_messages_per_doc"],
        "bloom_filters_per_doc": bf["bloom_filters_per_doc"],
        "bloom_bytes_per_doc": bf["bloom_bytes_per_doc"],
        "announce_bytes_per_doc": td["announce_bytes_per_doc"],
        "alerts_per_doc": td["alerts_per_doc"],
        "longest_lists": runs["td"].longest,
        "runs": {r: runs[r].spec.name for r in RESOLUTIONS},
    }


def reductions(base: dict, new: dict) -> dict:
    return {
        "queries": reduction(base["queries_per_doc"], new["queries_per_doc"]),
        "td": reduction(base["td_bytes_per_doc"], new["td_bytes_per_doc"]),
        "bf": reduction(base["bf_bytes_per_doc"], new["bf_bytes_per_doc"]),
    }


# ---- the experiments --------------------------------------------------------------------


class Table2:
    name = "table2"
    title = "Table 2: query indexing schemes for Uniform, Skew and InverSkew queries"
    strategies = ("ri", "mhi", "oi", "sap-mhi")

    def specs(self, plan: Plan) -> list[RunSpec]:
        return [
            spec(s, w, r, plan) for w in WORKLOADS for s in self.strategies for r in RESOLUTIONS
        ]

    def numbers(self, plan: Plan, results) -> dict:
        out = {}
        for w in WORKLOADS:
            rows = {s: point(results, plan, s, w) for s in self.strategies}
            out[w] = {
                "rows": rows,
                "reductions": {
                    "MHI over RI": reductions(rows["ri"], rows["mhi"]),
                    "OI over RI": reductions(rows["ri"], rows["oi"]),
                    "SAP-MHI over RI": reductions(rows["ri"], rows["sap-mhi"]),
                    "SAP-MHI over MHI": reductions(rows["mhi"], rows["sap-mhi"]),
                },
            }
        return {"workloads": out, "synopsis_k": plan.synopsis_k}


class Piggyback:
    name = "piggyback"
    title = "Figure 3: bandwidth saving of MHI over RI by piggybacked successor ids"

    def specs(self, plan: Plan) -> list[RunSpec]:
        w, top = plan.piggyback_workload, max(plan.piggybacks)
        return [spec("mhi", w, r, plan, k) for k in plan.piggybacks for r in RESOLUTIONS] + [
            spec("ri", w, r, plan, k) for k in sorted({0, top}) for r in RESOLUTIONS
        ]

    def numbers(self, plan: Plan, results) -> dict:
        w, top = plan.piggyback_workload, max(plan.piggybacks)
        ri = point(results, plan, "ri", w)
        rows = []
        for k in plan.piggybacks:
            mhi = point(results, plan, "mhi", w, k)
            rows.append(
                {
                    "k": k,
                    "mhi": mhi,
                    "saving_over_ri": reductions(ri, mhi),
                    "announce_overhead_bytes_per_doc": mhi["announce_bytes_per_doc"]
                    - ri["announce_bytes_per_doc"],
                }
            )
        return {
            "workload": w,
            "ri": ri,
            "rows": rows,
            "ri_top_k": {"k": top, **point(results, plan, "ri", w, top)},
        }


class SynopsisSize:
    name = "synopsis"
    title = "Figures 4 and 5: SAP-MHI against MHI by synopsis size K (second half of the documents)"

    def specs(self, plan: Plan) -> list[RunSpec]:
        return [
            spec(s, w, r, plan, 0, "second", k)
            for w in WORKLOADS
            for r in RESOLUTIONS
            for s, k in [("mhi", None)] + [("sap-mhi", k) for k in plan.synopsis_ks]
        ]

    def numbers(self, plan: Plan, results) -> dict:
        out = {}
        for w in WORKLOADS:
            mhi = point(results, plan, "mhi", w, 0, "second")
            rows = []
            for k in plan.synopsis_ks:
                sap = point(results, plan, "sap-mhi", w, 0, "second", k)
                rows.append({"k": k, "sap_mhi": sap, "reduction_over_mhi": reductions(mhi, sap)})
            out[w] = {"mhi": mhi, "rows": rows}
        return {"workloads": out}


class Breakdown:
    name = "breakdown"
    title = "Figure 6: reduction over RI by MHI, sampling and piggybacking (second half)"

    def specs(self, plan: Plan) -> list[RunSpec]:
        k = plan.breakdown_piggyback
        return [
            spec(s, w, r, plan, p, "second")
            for w in WORKLOADS
            for r in RESOLUTIONS
            for s, p in (("ri", 0), ("mhi", 0), ("sap-mhi", 0), ("sap-mhi", k))
        ]

    def numbers(self, plan: Plan, results) -> dict:
        out = {}
        for w in WORKLOADS:
            ri, mhi, sap, sapk = (
                point(results, plan, s, w, p, "second")
                for s, p in (
                    ("ri", 0),
                    ("mhi", 0),
                    ("sap-mhi", 0),
                    ("sap-mhi", plan.breakdown_piggyback),
                )
            )
            parts = {}
            for metric, key in (
                ("queries", "queries_per_doc"),
                ("td", "td_bytes_per_doc"),
                ("bf", "bf_bytes_per_doc"),
            ):
                base = ri[key]
                parts[metric] = {
                    "mhi": 100 * (ri[key] - mhi[key]) / base,
                    "sampling": 100 * (mhi[key] - sap[key]) / base,
                    "piggybacking": 100 * (sap[key] - sapk[key]) / base,
                    "total": reduction(base, sapk[key]),
                }
            out[w] = {
                "ri": ri,
                "mhi": mhi,
                "sap_mhi": sap,
                "sap_mhi_piggyback": sapk,
                "parts": parts,
            }
        return {
            "workloads": out,
            "synopsis_k": plan.synopsis_k,
            "piggyback": plan.breakdown_piggyback,
        }


EXPERIMENTS = {e.name: e for e in (Table2(), Piggyback(), SynopsisSize(), Breakdown())}
