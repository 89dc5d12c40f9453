"""Each experiment's results section: its numbers beside the paper's, and how they differ.

One function per experiment (`SECTIONS`: table2, piggyback, synopsis, breakdown) turns
the numbers cqengine.evaluation.reports.experiments made of its runs into Markdown: tables of
ours and of the paper's, the differences, and why they differ
(cqengine.evaluation.reports.differences). The parts every report has around a section are
cqengine.evaluation.reports.report's.
"""

from __future__ import annotations

from cqengine.evaluation.passes.lab import Lab
from cqengine.evaluation.reports import paper
from cqengine.evaluation.reports.differences import concentration, filters, why_we_differ
from cqengine.evaluation.reports.experiments import LABELS, WORKLOADS
from cqengine.evaluation.reports.markdown import load, n, pct, table


def table2_md(x: dict, lab: Lab) -> list[str]:
    out = [
        "## Results",
        "",
        f"Every strategy indexes the same queries; OI ranks terms by the corpus's "
        f"document frequencies (as the paper's OI does); SAP-MHI uses K = "
        f"{x['synopsis_k']}. " + SAMPLED,
        "All documents are measured.",
        "",
    ]
    for w in WORKLOADS:
        rows = x["workloads"][w]["rows"]
        out += (
            [f"### {w.capitalize()} queries", ""]
            + table(
                [
                    "indexing",
                    "load (1st, 50th, 99th)",
                    "queries/doc",
                    "TD bytes/doc",
                    "BF bytes/doc",
                    "Bloom filters/doc",
                    "alerts/doc",
                ],
                [
                    [
                        LABELS[s] + (f" (K={x['synopsis_k']})" if s == "sap-mhi" else ""),
                        load(r["load"]),
                        n(r["queries_per_doc"]),
                        n(r["td_bytes_per_doc"]),
                        n(r["bf_bytes_per_doc"]),
                        n(r["bloom_filters_per_doc"]),
                        n(r["alerts_per_doc"]),
                    ]
                    for s, r in rows.items()
                ],
            )
            + [""]
        )
    out += (
        ["### The paper's Table 2 (Skew)", ""]
        + table(
            ["indexing", "load (1st, 50th, 99th)", "queries/doc", "TD bytes/doc", "BF bytes/doc"],
            [
                [
                    LABELS[s],
                    load(r["load"]),
                    n(r["queries_per_doc"]),
                    n(r["td_bytes_per_doc"]),
                    n(r["bf_bytes_per_doc"]),
                ]
                for s, r in paper.TABLE2_SKEW.items()
            ],
        )
        + [""]
    )
    rows = []
    for w in WORKLOADS:
        for name, red in x["workloads"][w]["reductions"].items():
            quoted = paper.QUOTED.get((w, name), {})
            note = paper.QUOTED_NOTES.get((w, name), "")
            rows.append(
                [
                    w,
                    name,
                    pct(red["queries"]),
                    pct(red["td"]),
                    pct(red["bf"]),
                    ", ".join(f"{m} {v}%" for m, v in quoted.items()) or note or "–",
                ]
            )
    out += ["### Reductions", ""] + table(
        ["workload", "", "queries/doc", "TD bytes", "BF bytes", "paper"], rows
    )
    out += ["", "## Differences from the paper", ""]
    ours = x["workloads"]["skew"]["rows"]
    diff = []
    for s, theirs in paper.TABLE2_SKEW.items():
        for key, label in (
            ("queries_per_doc", "queries/doc"),
            ("td_bytes_per_doc", "TD bytes"),
            ("bf_bytes_per_doc", "BF bytes"),
        ):
            diff.append(
                [
                    f"Skew {LABELS[s]} {label}",
                    n(ours[s][key]),
                    n(theirs[key]),
                    f"{ours[s][key] / theirs[key]:.2f}x",
                ]
            )
    for (w, name), quoted in paper.QUOTED.items():
        for m, v in quoted.items():
            mine = x["workloads"][w]["reductions"][name][m]
            diff.append(
                [
                    f"{w} {name} {m}",
                    pct(mine),
                    f"{v}%",
                    f"{mine - v:+.1f} points" if mine is not None else "–",
                ]
            )
    out += table(["number", "ours", "paper", "ours vs paper"], diff) + [""]
    order = {
        w: sorted(
            x["workloads"][w]["rows"], key=lambda s: x["workloads"][w]["rows"][s]["queries_per_doc"]
        )
        for w in WORKLOADS
    }
    out += [
        "Order by queries/doc, fewest first — paper (Skew): OI, MHI, RI; ours: "
        + "; ".join(f"{w}: {', '.join(LABELS[s] for s in order[w])}" for w in WORKLOADS)
        + ".",
        "",
    ]
    return out + why_we_differ(lab) + concentration(x, lab) + filters(x)


def piggyback_md(x: dict, lab: Lab) -> list[str]:
    ri = x["ri"]
    rows = [
        [
            str(r["k"]),
            n(r["mhi"]["queries_per_doc"]),
            n(r["mhi"]["td_bytes_per_doc"]),
            n(r["mhi"]["bf_bytes_per_doc"]),
            pct(r["saving_over_ri"]["queries"]),
            pct(r["saving_over_ri"]["td"]),
            pct(r["saving_over_ri"]["bf"]),
            n(r["announce_overhead_bytes_per_doc"]),
        ]
        for r in x["rows"]
    ]
    first, last = x["rows"][0], x["rows"][-1]
    top = x["ri_top_k"]
    ri_q = ri["queries_per_doc"]
    fewer = (1 - top["queries_per_doc"] / ri_q) * 100 if ri_q else None
    return (
        [
            "## Results",
            "",
            f"{x['workload'].capitalize()} queries. RI without piggybacking: "
            f"{n(ri['queries_per_doc'])} queries/doc, {n(ri['td_bytes_per_doc'])} TD and "
            f"{n(ri['bf_bytes_per_doc'])} BF bytes/doc.",
            "",
        ]
        + table(
            [
                "k",
                "MHI queries/doc",
                "MHI TD B/doc",
                "MHI BF B/doc",
                "saving: queries",
                "saving: TD",
                "saving: BF",
                "announcement overhead B/doc",
            ],
            rows,
        )
        + [
            "",
            "![Figure 3](figure3.png)",
            "",
            "## Differences from the paper",
            "",
            f"The paper plots the saving growing with k (Figure 3, no values given). Ours goes "
            f"from {pct(first['saving_over_ri']['td'])} to {pct(last['saving_over_ri']['td'])} "
            f"(TD) and from {pct(first['saving_over_ri']['bf'])} to "
            f"{pct(last['saving_over_ri']['bf'])} (BF) as k goes {first['k']} to {last['k']}, for "
            f"{n(last['announce_overhead_bytes_per_doc'])} more announcement bytes per document. "
            f"Our pruning uses piggybacked ids for any strategy: RI with k = {top['k']} presents "
            f"{n(top['queries_per_doc'])} queries/doc "
            f"({pct(fewer)} "
            f"fewer than at k = 0); the paper's Algorithm 4 is MHI's alone, so its RI gains "
            f"nothing from k.",
            "",
        ]
        + why_we_differ(lab)
    )


SAMPLED = (
    "The popular terms are the coin-toss synopsis (CT(32), one register) of the first half of the "
    "documents, computed centrally: with one register, merging is exact, so this is the very "
    "synopsis the publishing nodes' gossip converges to "
    "(tests/core/placement/test_gossip.py). The top K of the largest synopsis serves every "
    "smaller K."
)


def synopsis_md(x: dict, lab: Lab) -> list[str]:
    out = ["## Results", "", SAMPLED, ""]
    best = {"queries": 0.0, "bandwidth": 0.0}
    for w in WORKLOADS:
        d = x["workloads"][w]
        mhi = d["mhi"]
        rows = [
            [
                "MHI",
                load(mhi["load"]),
                n(mhi["queries_per_doc"]),
                n(mhi["td_bytes_per_doc"]),
                n(mhi["bf_bytes_per_doc"]),
                "",
                "",
                "",
            ]
        ]
        for r in d["rows"]:
            s, red = r["sap_mhi"], r["reduction_over_mhi"]
            rows.append(
                [
                    f"SAP-MHI K={r['k']}",
                    load(s["load"]),
                    n(s["queries_per_doc"]),
                    n(s["td_bytes_per_doc"]),
                    n(s["bf_bytes_per_doc"]),
                    pct(red["queries"]),
                    pct(red["td"]),
                    pct(red["bf"]),
                ]
            )
            best["queries"] = max(best["queries"], red["queries"] or 0)
            best["bandwidth"] = max(best["bandwidth"], red["td"] or 0, red["bf"] or 0)
        out += (
            [f"### {w.capitalize()} queries", ""]
            + table(
                [
                    "indexing",
                    "load (1st, 50th, 99th)",
                    "queries/doc",
                    "TD B/doc",
                    "BF B/doc",
                    "reduction: queries",
                    "reduction: TD",
                    "reduction: BF",
                ],
                rows,
            )
            + [""]
        )
    out += [
        "![Figure 4](figure4.png)",
        "",
        "![Figure 5](figure5.png)",
        "",
        "## Differences from the paper",
        "",
    ]
    out += [
        f"Largest reduction of SAP-MHI over MHI: ours {pct(best['queries'])} in queries/doc and "
        f"{pct(best['bandwidth'])} in bandwidth; the paper's {paper.SAP_OVER_MHI_MAX['queries']}% "
        f"and {paper.SAP_OVER_MHI_MAX['bandwidth']}% "
        f"({best['queries'] - paper.SAP_OVER_MHI_MAX['queries']:+.1f} and "
        f"{best['bandwidth'] - paper.SAP_OVER_MHI_MAX['bandwidth']:+.1f} points)."
    ]
    lo, hi = paper.BF_ANOMALY
    for w in ("skew", "uniform"):
        red = {r["k"]: r["reduction_over_mhi"]["bf"] for r in x["workloads"][w]["rows"]}
        if lo in red and hi in red:
            q_lo, q_hi = _qns(x, w, lo), _qns(x, w, hi)
            seen = "shows it too" if red[hi] < red[lo] else "does not show it"
            why = (
                " — more QNs, each fetching a filter, which is the paper's explanation"
                if q_hi > q_lo
                else ""
            )
            out.append(
                f"The paper's Bloom-filter anomaly (K = {hi} saving less than K = {lo}) on {w}: "
                f"ours {seen} ({pct(red[lo])} at {lo}, {pct(red[hi])} at {hi}; filters fetched per "
                f"document {n(q_lo)} and {n(q_hi)}{why})."
            )
    skew_mhi = x["workloads"]["skew"]["mhi"]["queries_per_doc"]
    theirs = paper.TABLE2_SKEW["mhi"]["queries_per_doc"]
    ratio = skew_mhi / theirs
    if ratio > 1.1:
        baseline = (
            f"Our MHI is the weaker baseline on Skew: it presents {n(skew_mhi)} queries per "
            f"document against the paper's {n(theirs)} ({ratio:.2f}x; where its queries sit, "
            f"the table2 report's longest lists say), so avoiding popular terms saves more here "
            f"than in the paper."
        )
    elif ratio < 0.9:
        baseline = (
            f"Our MHI is the stronger baseline on Skew: it presents {n(skew_mhi)} queries per "
            f"document against the paper's {n(theirs)} ({ratio:.2f}x), so avoiding popular "
            f"terms has less to save here than in the paper."
        )
    else:
        baseline = (
            f"Our MHI presents about as many queries per document on Skew as the paper's "
            f"({n(skew_mhi)} against {n(theirs)}), so SAP-MHI's savings over it compare with the "
            f"paper's directly."
        )
    out += [
        "",
        baseline + " On Bloom filters SAP-MHI saves little on Skew: nearly every QN still holds "
        "a candidate and fetches the filter.",
    ]
    return out + [""] + why_we_differ(lab)


def _qns(x: dict, w: str, k: int) -> float:
    return next(
        r["sap_mhi"]["bloom_filters_per_doc"] for r in x["workloads"][w]["rows"] if r["k"] == k
    )


def breakdown_md(x: dict, lab: Lab) -> list[str]:
    rows = []
    for w in WORKLOADS:
        for metric, label in (("queries", "queries/doc"), ("td", "TD bytes"), ("bf", "BF bytes")):
            p = x["workloads"][w]["parts"][metric]
            rows.append(
                [
                    w,
                    label,
                    pct(p["mhi"]),
                    pct(p["sampling"]),
                    pct(p["piggybacking"]),
                    pct(p["total"]),
                ]
            )
    return (
        [
            "## Results",
            "",
            f"SAP-MHI with K = {x['synopsis_k']} and k = {x['piggyback']} piggybacked ids, "
            f"against RI, measured on the second half of the documents. Each part is its step's "
            f"reduction as a share of RI's figure, so the parts add up to the total.",
            "",
            SAMPLED,
            "",
        ]
        + table(["workload", "metric", "MHI", "sampling", "piggybacking", "total"], rows)
        + [
            "",
            "![Figure 6](figure6.png)",
            "",
            "## Differences from the paper",
            "",
            "The paper gives Figure 6 as bars without values; it reports that sampling with K = "
            "1,000 reduces queries and bandwidth for all three workloads, that MHI reduces Term "
            "Dialogue bandwidth little for InverSkew, and that piggybacking helps Uniform and "
            "InverSkew most. Ours, by the table above: "
            + "; ".join(
                f"{w}: MHI {pct(x['workloads'][w]['parts']['td']['mhi'])}, sampling "
                f"{pct(x['workloads'][w]['parts']['td']['sampling'])}, piggybacking "
                f"{pct(x['workloads'][w]['parts']['td']['piggybacking'])} of RI's TD bytes"
                for w in WORKLOADS
            )
            + ".",
            "",
        ]
        + why_we_differ(lab)
    )


SECTIONS = {
    "table2": table2_md,
    "piggyback": piggyback_md,
    "synopsis": synopsis_md,
    "breakdown": breakdown_md,
}
