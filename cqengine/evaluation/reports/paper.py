"""What the paper reports (Zhu, sections 7.2 and 8.4), to set beside our numbers.

Only numbers the text or Table 2 give are here; the figures (3-6) are given as curves
without values, so for them the report compares shapes and the quoted extremes.
"""

CORPUS = {"documents": 10_000, "vocabulary": 46_654, "unique_terms_per_document": 178}
SCALE = {"nodes": 1000, "queries": 100_000, "docs": 10_000, "mean_size": 5.0}
SYNOPSIS_KS = (500, 1000, 1500, 2000, 2500, 3000)

# Table 2 (Skew): load (1st, 50th, 99th percentile), queries/doc, TD and BF bytes/doc
TABLE2_SKEW = {
    "ri": {
        "load": [4, 52, 706],
        "queries_per_doc": 11476,
        "td_bytes_per_doc": 282285,
        "bf_bytes_per_doc": 36853,
    },
    "mhi": {
        "load": [0, 18, 1027],
        "queries_per_doc": 8560,
        "td_bytes_per_doc": 188530,
        "bf_bytes_per_doc": 30338,
    },
    "oi": {
        "load": [8, 67, 487],
        "queries_per_doc": 649,
        "td_bytes_per_doc": 12518,
        "bf_bytes_per_doc": 20464,
    },
}

# reductions the text quotes, percent: (workload, "X over Y") -> metric -> value
QUOTED = {
    ("skew", "MHI over RI"): {"queries": 25.4, "td": 33.2, "bf": 17.7},
    ("skew", "OI over RI"): {"queries": 94.3, "td": 95.6, "bf": 44.5},
    ("uniform", "MHI over RI"): {"td": 14.9, "bf": 39.3},
}
QUOTED_NOTES = {
    (
        "inverskew",
        "MHI over RI",
    ): '"similar to Skew except that MHI saves little bandwidth over RI for Term Dialogue"',
}

# Figure 5: SAP-MHI over MHI, the largest reductions the text quotes (percent)
SAP_OVER_MHI_MAX = {"queries": 78.9, "bandwidth": 80.6}
# Figure 5(b): with Bloom filters, K = 2,000 saved less than K = 1,500 (Skew and Uniform)
BF_ANOMALY = (1500, 2000)
