"""The per-turn row's interval (issue 34, ``bench/turns.py``): a 95% bootstrap interval of the
difference of two medians, resampled jointly for alternated turns. It must cover the true shift
of a shifted copy, be narrow when the pairs move together, and never claim a shift of
identical sides."""

from __future__ import annotations

import random

from bench.turns import _overhead_ci


def test_issue_34_the_interval_covers_a_known_shift_and_pairs_narrow_it() -> None:
    rnd = random.Random(7)
    raw = [60 + rnd.expovariate(1 / 12) for _ in range(400)]  # skewed, like a turn's times
    lo, hi = _overhead_ci(raw, raw)
    assert lo == hi == 0.0  # the same turns: no overhead at all
    shifted = [t + 2.0 for t in raw]
    lo, hi = _overhead_ci(shifted, raw)
    assert lo == hi == 2.0  # resampled together, an exact shift stays exact
    # a noisy shift of 2 ms (symmetric, so the medians differ by exactly 2 ms): the intervals of
    # 40 independent runs cover it about 95% of the time
    covered = widths = 0.0
    for seed in range(40):
        r = random.Random(seed)
        base = [r.gauss(70, 12) for _ in range(200)]
        side = [t + 2.0 + r.gauss(0, 8) for t in base]
        lo, hi = _overhead_ci(side, base, rounds=400, seed=seed)
        covered += lo < 2.0 < hi
        widths += hi - lo
    assert covered >= 32, covered
    # the same sides unpaired (one turn fewer: resampled each on its own) give wider intervals
    r = random.Random(99)
    base = [r.gauss(70, 12) for _ in range(200)]
    side = [t + 2.0 + r.gauss(0, 8) for t in base]
    lo, hi = _overhead_ci(side[:-1], base, rounds=400)
    assert hi - lo > widths / 40
