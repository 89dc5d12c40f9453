"""The paper's evaluation (Zhu, sections 7 and 8.4) on the simulator shell, in four rooms
in the order it works: `setup` (inputs, matcher, scale, forks), `measuring` (sim, tally,
measure, meters, depths, tags, wire), `passes` (runs, rings, publishing, readoff, lab) and
`reports` (experiments, report, sections, differences, plots, paper, markdown, evaluate,
beyond); each imports only the rooms before it.

`inputs` reads the corpus (`cqengine prep` output, or a small generated one) and derives
what every run shares: query workloads, the matcher's answers, sampled popular terms.
`runs` says what a run is and which passes measure many at once; `lab` makes the runs
asked for: `rings` builds an indexed 1,000-node ring per (strategy, workload, synopsis)
with the very same EngineNode code the live ring runs (`sim`), and `publishing`
publishes each workload's documents once, on forked copies of one of them hosting the
others' indexes, measuring every index, resolution method and piggyback depth in that
pass (the observer of `measure`, with `meters`, `depths`, `tags` and `wire`), checking
every match against the matcher; `readoff` reads each run off its pass. `experiments`
says which runs each of the paper's tables and figures needs and turns their results
into numbers; `report` writes those as Markdown (`sections`, `differences`), JSON and
PNG (`plots`).
"""


class EvaluationError(Exception):
    """An experiment cannot run as asked (bad corpus, bad scale); the message says why."""
