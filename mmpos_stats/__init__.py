"""Statistics of every table mmpos prints: comparing the runs of two arms
(e.g. a pretrained backbone and random init), correcting for the number of
comparisons in a table, the smallest difference a design can detect, and
intervals of a ranking. A user comparing their own runs imports this package
(``import mmpos_stats as stats``); the harness' tables (demo, method ranking,
position study, paper-table runner,
``tools/analysis_tools/dense_probe_suite.py``) and the benchmarks' verdicts
use nothing else. It needs numpy and scipy only, not torch or mmpos (the
benchmarks import it on a machine with torch alone).

The rules, fixed before any stored result was read (issue 33), the same for
every table:

* **Replicates.** A value comes from a run; an arm's replicates are its
  independent runs. With several pretraining runs per arm, each
  transferred with several transfer seeds (a two-level design
  ``[[y per transfer seed] per pretraining run]``), the replicate is the
  pretraining run and its value the mean over its transfer seeds.
* **Tests**, two-sided at ``ALPHA = 0.05``:

  - :func:`welch`: arms of independent runs. Welch's t on the per-run
    means ``m_p`` (``M = mean_p m_p``, ``s^2 = sum_p (m_p - M)^2 / (P -
    1)``): ``D = M_a - M_b``, ``SE^2 = s_a^2 / P_a + s_b^2 / P_b``,
    ``t = D / SE``, ``nu = SE^4 / ((s_a^2/P_a)^2 / (P_a - 1) +
    (s_b^2/P_b)^2 / (P_b - 1))`` (Welch-Satterthwaite). ``E[s^2 / P]`` is
    the variance of ``M`` counting both the pretraining and the transfer
    variance.
  - :func:`paired`: arms that share seeds (each seed's two runs are run
    with that seed, e.g. the same order of batches; one value per seed per
    arm).
    The one-sample t on the per-seed differences ``d``: ``D = mean(d)``,
    ``SE = sd(d) / sqrt(n)``, ``nu = n - 1``.

  The printed interval is the test's: ``D -+ t_{0.975, nu} SE`` (it
  excludes 0 exactly when the unadjusted p is below 0.05).
* **Families.** A table is one family unless it says otherwise (each test
  counted once: an ordering and its mirror are one test). Its p values are
  adjusted by Holm (family-wise error 5 %) in every table whose cells are
  read as verdicts (the demo, the method ranking and its orderings, the
  dense-probe suite), and by Benjamini-Hochberg (false discovery rate 5 %)
  in the tables declared exploratory (the position-study grids, which scan
  schemes x resolutions). Every cell prints its adjusted p.
* **Verdicts.** ``higher`` / ``lower`` when the adjusted p is below 0.05;
  otherwise ``no verdict``: the design could not tell the difference from
  0. A difference that is not significant is always smaller than the
  minimum detectable difference (``|D| < t_{0.975, nu} SE < MDD``), so
  ``no verdict`` is exactly "the design cannot detect a difference of this
  size", never "no difference". Zero variance (both arms' run means each
  all equal, or every paired difference equal; equal to 12 significant
  digits of the largest value compared, in whatever unit) has no p and is ``no verdict``, never a verdict; fewer than 2
  runs on a side (2 pairs) is ``no test``.
* **Minimum detectable difference** (:func:`minimum_detectable_difference`)
  of a cell: the ``delta`` at which its test rejects with power 0.8,
  ``P(|T| > t_{1 - alpha/2, nu}) = 0.8`` for ``T`` non-central t with
  ``nu`` degrees of freedom and non-centrality ``delta / SE`` (both tails;
  the cell's observed ``SE`` and ``nu``). For equal arms of ``n`` runs
  with equal sample variances it is ``statsmodels``' ``TTestIndPower``
  effect size times the pooled SD; for a paired design ``TTestPower``'s
  times ``sd(d)``. A :class:`Comparison` stores it at ``alpha = 0.05``;
  the tables print it at the level their family applies
  (:func:`family_mdd`: ``alpha = 0.05 / m`` under Holm or BH, the level
  at which a cell is a verdict whatever the others' p), as the range over
  the cells of a column (:func:`describe` with ``adjusted``).
* **Runs a design needs** (:func:`runs_for_difference`): the smallest
  number of runs per arm whose minimum detectable difference (two equal
  arms, the run SD pooled within conditions by :func:`pooled_sd`) is at
  most the difference asked for, at the family's level
  (``mmpos_harness/design.py`` asks at ``0.05 / m``).
* **Equivalence** (:func:`tost`): only by two one-sided tests against a
  margin fixed in the study's design before its runs; a difference
  without a verdict is never read as "no difference".
* **Intervals.** Every interval a table prints is its test's t interval
  on the per-run means; its coverage is simulated in
  ``tests/test_stats.py`` at 2, 3 and 5 pretraining runs x 3
  transfer runs (at least 93 % for 95 %). :func:`bootstrap_interval`,
  the hierarchical bootstrap (resample the pretraining runs, then the
  transfer seeds within each drawn run; 10,000 draws, seed 0, 2.5 / 97.5
  percentiles), undercovers there (about 70 / 80 / 87 %: a plug-in
  variance and no small-sample correction); no table uses it. An arm with
  fewer than 2 runs gets no interval and no rank (the functions refuse
  it, :func:`welch` has no test).
* **Rankings** (:func:`ranks`, :func:`t_rank_intervals`): per task the
  arms' means are ranked (1 = highest; ties, equal to 12 significant
  digits, share their average rank), an arm's score is its mean rank over
  the tasks, and its rank the rank of that score (ties averaged). The 95 %
  interval of each arm's rank is the 2.5 / 97.5 percentile (lower /
  higher order statistic) of its rank over 2,000 draws of every arm's
  mean on every task from its t distribution ``M + SE T_{P-1}`` (seed 0);
  its coverage of the true rank is simulated in the tests.
  :func:`rank_intervals` draws hierarchical bootstrap means instead and
  undercovers as :func:`bootstrap_interval` does.
* **Aggregates over tasks** (Agarwal et al., NeurIPS 2021): :func:`iqm`,
  :func:`probability_of_improvement`, :func:`performance_profile` of
  ``(runs, tasks)`` score matrices, with :func:`stratified_interval`
  (the runs of each task resampled). Descriptive: with 2-5 runs per task
  the stratified bootstrap covers less than its 95 % too (IQM over 7
  tasks: about 83 / 90 / 92 % at 2 / 3 / 5 runs, 200 simulated data
  sets); no verdict is read from them.

Inputs: a *sample* is a sequence of runs, a run a number (one value) or a
non-empty sequence of numbers (its transfer seeds). ``None``, NaN and
infinities are refused with an error naming the value.
"""
import dataclasses
import math
from collections import abc
from typing import Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

ALPHA = 0.05
POWER = 0.8
HOLM, BH = 'holm', 'bh'
CORRECTIONS = {HOLM: 'Holm', BH: 'Benjamini-Hochberg'}
BOOTSTRAP_DRAWS = 10_000
RANK_DRAWS = 2_000
SEED = 0

Run = Union[float, Sequence[float]]
Sample = Sequence[Run]


@dataclasses.dataclass(frozen=True)
class Test:
    """The fields :class:`Comparison` and :class:`Equivalence` share (arm
    ``a`` against arm ``b``); :func:`family` fills the last three.

    Attributes:
        test: ``'welch'`` or ``'paired'``.
        difference: ``D``, mean of ``a`` minus mean of ``b`` (per-run
            means averaged with equal weight).
        n_a, n_b: replicates per arm (runs; paired: pairs, equal).
        se: standard error of ``D``; None without a test.
        df: degrees of freedom ``nu``; None without a test.
        pvalue: p of the test; None without a test (``reason``).
        low, high: the test's t interval of ``D``.
        reason: why there is no test (``pvalue`` None), else None.
        p_adj: p adjusted within its family (a lone test is a family of
            one: ``pvalue``).
        correction: ``'holm'``, ``'bh'`` or ``'none'``.
        family_size: tests in the family (those with a p value).
    """
    test: str
    difference: float
    n_a: int
    n_b: int
    se: Optional[float] = None
    df: Optional[float] = None
    pvalue: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    reason: Optional[str] = None
    p_adj: Optional[float] = None
    correction: str = 'none'
    family_size: int = 1

    def _without_p(self) -> str:
        """The verdict of a test without a p value: ``'no test'`` (fewer
        than 2 replicates on a side) or ``'no verdict'`` (e.g. zero
        variance)."""
        return 'no test' if min(self.n_a, self.n_b) < 2 else 'no verdict'

    def asdict(self) -> dict:
        """The fields and the verdict, for result files."""
        return dict(dataclasses.asdict(self), verdict=self.verdict)


@dataclasses.dataclass(frozen=True)
class Comparison(Test):
    """Result of :func:`welch` or :func:`paired` (:class:`Test`'s fields;
    ``pvalue`` two-sided, ``low``, ``high`` the 95 % t interval ``D -+
    t_{0.975, nu} SE``), and:

    Attributes:
        statistic: ``t = D / SE``; None without a test.
        mdd: minimum detectable difference at 80 % power
            (:func:`minimum_detectable_difference`).
    """
    statistic: Optional[float] = None
    mdd: Optional[float] = None

    @property
    def verdict(self) -> str:
        """``'higher'`` / ``'lower'`` (``a`` than ``b``, adjusted p below
        ``ALPHA``), ``'no verdict'`` or ``'no test'`` (module docstring)."""
        if self.pvalue is None:
            return self._without_p()
        if self.p_adj < ALPHA:
            return 'higher' if self.difference > 0 else 'lower'
        return 'no verdict'

    def swapped(self) -> 'Comparison':
        """The same test read as ``b`` minus ``a``."""
        flip = {k: None if v is None else -v for k, v in (
            ('difference', self.difference), ('statistic', self.statistic),
            ('low', self.high), ('high', self.low))}
        return dataclasses.replace(self, n_a=self.n_b, n_b=self.n_a, **flip)

    @classmethod
    def from_dict(cls, d: dict) -> 'Comparison':
        """Inverse of :meth:`asdict`."""
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls)})


@dataclasses.dataclass(frozen=True)
class Equivalence(Test):
    """Result of :func:`tost`: whether the difference of a
    :class:`Comparison` lies within ``[-margin, margin]`` (:class:`Test`'s
    fields: the comparison's ``test``, ``difference``, ``n_a``, ``n_b``,
    ``se``, ``df``; ``pvalue`` the larger of the two one-sided p values;
    ``low``, ``high`` the 90 % t interval ``D -+ t_{0.95, nu} SE``, inside
    ``[-margin, margin]`` exactly when the unadjusted p is below 0.05),
    and:

    Attributes:
        margin: the equivalence margin (from the study's design file);
            required.
    """
    margin: Optional[float] = None

    def __post_init__(self):
        if self.margin is None:
            raise TypeError('Equivalence: margin is required')

    @property
    def verdict(self) -> str:
        """``'equivalent'`` (adjusted p below ``ALPHA``: the difference is
        within the margin), ``'no verdict'`` or ``'no test'``."""
        if self.pvalue is None:
            return self._without_p()
        return 'equivalent' if self.p_adj < ALPHA else 'no verdict'


@dataclasses.dataclass(frozen=True)
class Interval:
    """Result of :func:`bootstrap_interval`: the 95 % percentile interval
    ``[low, high]`` of ``D`` over ``draws`` resamples drawn with ``seed``."""
    low: float
    high: float
    draws: int
    seed: int


@dataclasses.dataclass(frozen=True)
class RankInterval:
    """One arm in :func:`rank_intervals`: its ``rank`` (1 = best, ties
    averaged) and the 95 % bootstrap interval ``[low, high]`` of it."""
    rank: float
    low: float
    high: float


# ------------------------------------------------------------------ inputs
def _finite(name: str, where: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)) or \
            not math.isfinite(value):
        raise ValueError(f'{name}: {where} is {value!r}; every value must be '
                         'a finite number')
    return float(value)


def _runs(name: str, sample: Sample) -> List[np.ndarray]:
    """``sample`` checked, as one float array per run."""
    if isinstance(sample, (str, bytes)) or not isinstance(
            sample, (abc.Sequence, np.ndarray)) or len(sample) == 0:
        raise ValueError(f'{name}: a sample is a non-empty sequence of runs '
                         f'(numbers or sequences of numbers), got {sample!r}')
    out = []
    for i, run in enumerate(sample):
        if isinstance(run, (abc.Sequence, np.ndarray)) and not isinstance(
                run, (str, bytes)):
            if len(run) == 0:
                raise ValueError(f'{name}: run {i} has no value')
            out.append(np.array([_finite(name, f'run {i} value {j}', v)
                                 for j, v in enumerate(run)]))
        else:
            out.append(np.array([_finite(name, f'run {i}', run)]))
    return out


def _replicated(caller: str, name: str, sample: Sample) -> List[np.ndarray]:
    """``sample`` as :func:`_runs` gives it, refused with one line when it
    has fewer than 2 runs: one run has no spread of its own to put an
    interval or a rank on (:func:`welch` has no test for it either)."""
    runs = _runs(name, sample)
    if len(runs) < 2:
        raise ValueError(f'{caller}: {name} has 1 run; an interval or a rank '
                         'needs at least 2 runs per arm')
    return runs


def _constant(x: np.ndarray, scale: float) -> bool:
    """All equal to 12 significant digits of the data's ``scale`` (the
    largest magnitude of the values the means or differences ``x`` come
    from): float noise of a mean or a difference is not variance, in any
    unit."""
    return float(np.ptp(x)) <= 1e-12 * scale


def _snap(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to 12 significant digits of its largest magnitude, so
    that values equal but for float noise (``0.1 + 0.2`` and ``0.3``) tie
    in a ranking."""
    scale = float(np.abs(x).max()) if x.size else 0.
    if scale == 0 or not math.isfinite(scale):
        return x
    quantum = 10.0**(math.floor(math.log10(scale)) - 11)
    return np.round(x / quantum) * quantum


# -------------------------------------------------------------------- tests
def minimum_detectable_difference(se: float, df: float, alpha: float = ALPHA,
                                  power: float = POWER) -> float:
    """Smallest true difference ``delta`` that a two-sided t test with
    standard error ``se`` and ``df`` degrees of freedom rejects at level
    ``alpha`` with probability ``power``: the root of
    ``nct.sf(c, df, delta / se) + nct.cdf(-c, df, delta / se) = power``,
    ``c = t_{1 - alpha/2, df}`` (statsmodels' power of a t test)."""
    from scipy.optimize import brentq
    from scipy.stats import nct
    from scipy.stats import t as student_t
    for name, value in (('se', se), ('df', df)):
        if not (isinstance(value, (int, float)) and math.isfinite(value)
                and value > 0):
            raise ValueError(f'minimum_detectable_difference: {name} must be '
                             f'a positive finite number, got {value!r}')
    if not 0 < alpha < power < 1:
        raise ValueError(f'minimum_detectable_difference: need 0 < alpha < '
                         f'power < 1, got alpha={alpha!r}, power={power!r}')
    crit = student_t.ppf(1 - alpha / 2, df)

    def gap(ncp):  # the lower tail as an upper one (nct.cdf far out: NaN)
        return nct.sf(crit, df, ncp) + nct.sf(crit, df, -ncp) - power

    high = 2 * crit + 4
    while gap(high) < 0:
        high *= 2
    return float(brentq(gap, 0.0, high, xtol=1e-10)) * se


def pooled_sd(groups: Sequence[Sequence[float]]) -> tuple:
    """The within-group standard deviation of ``groups`` (each the values
    of one condition, e.g. one configuration's pretraining seeds) and its
    degrees of freedom: ``s^2 = sum_g sum_i (y_gi - mean_g)^2 / df``,
    ``df = sum_g (n_g - 1)`` (a one-way ANOVA's residual mean square);
    groups of one value add nothing. Returns ``(s, df)``."""
    groups = [np.array([_finite('groups', f'group {g}', v) for v in group])
              for g, group in enumerate(groups)]
    df = sum(len(g) - 1 for g in groups if len(g))
    if df < 1:
        raise ValueError('pooled_sd: needs a group with at least 2 values')
    ss = sum(float(((g - g.mean())**2).sum()) for g in groups if len(g))
    return math.sqrt(ss / df), df


def runs_for_difference(sd: float, delta: float, alpha: float = ALPHA,
                        power: float = POWER, most: int = 1000) -> int:
    """Runs per arm (at least 2) with which two arms of equal size, run SD
    ``sd``, detect a true difference ``delta`` at level ``alpha`` with
    probability ``power``: the smallest ``n`` whose
    :func:`minimum_detectable_difference` (``SE = sd sqrt(2 / n)``, ``df =
    2n - 2``) is at most ``delta`` (statsmodels' ``TTestIndPower`` sample
    size, rounded up). A design that needs more than ``most`` is refused
    with a ValueError."""
    for name, value in (('sd', sd), ('delta', delta)):
        if not (isinstance(value, (int, float)) and math.isfinite(value)
                and value > 0):
            raise ValueError(f'runs_for_difference: {name} must be a '
                             f'positive finite number, got {value!r}')
    for n in range(2, most + 1):
        if minimum_detectable_difference(sd * math.sqrt(2 / n), 2 * n - 2,
                                         alpha, power) <= delta:
            return n
    raise ValueError(f'runs_for_difference: a difference of {delta:g} with '
                     f'a run SD of {sd:g} needs more than {most} runs per '
                     'arm')


def _t_test(test: str, diff: float, n_a: int, n_b: int, se: float,
            df: float) -> Comparison:
    from scipy.stats import t as student_t
    t = diff / se
    p = float(min(1.0, 2 * student_t.sf(abs(t), df)))
    half = float(student_t.ppf(1 - ALPHA / 2, df)) * se
    return Comparison(test, diff, n_a, n_b, se=se, df=df, statistic=t,
                      pvalue=p, low=diff - half, high=diff + half,
                      mdd=minimum_detectable_difference(se, df), p_adj=p)


def welch(a: Sample, b: Sample) -> Comparison:
    """Welch's t test of arm ``a`` against arm ``b`` on their per-run means
    (module docstring). ``a``, ``b``: samples, e.g.
    ``[[y per transfer seed] per pretraining run]`` or ``[y per run]``;
    runs may have different numbers of transfer seeds.

    Example: ``welch([[28.7, 29.5], [26.1, 26.6]], [[18.6, 18.1],
    [19.0, 18.0]]).pvalue``.
    """
    runs = [_runs(name, s) for name, s in (('a', a), ('b', b))]
    means = [np.array([r.mean() for r in side]) for side in runs]
    scale = max(float(np.abs(r).max()) for side in runs for r in side)
    (ma, mb), (na, nb) = means, (len(means[0]), len(means[1]))
    diff = float(ma.mean() - mb.mean())
    if min(na, nb) < 2:
        return Comparison('welch', diff, na, nb,
                          reason=f'runs {na} vs {nb}, fewer than 2 on a '
                          'side')
    va, vb = (0.0 if _constant(m, scale) else float(m.var(ddof=1)) / len(m)
              for m in (ma, mb))
    if va + vb == 0:
        return Comparison('welch', diff, na, nb,
                          reason='zero variance on both sides')
    df = (va + vb)**2 / (va**2 / (na - 1) + vb**2 / (nb - 1))
    return _t_test('welch', diff, na, nb, math.sqrt(va + vb), df)


def paired(a: Sequence[float], b: Sequence[float]) -> Comparison:
    """Paired t test of ``a`` against ``b``: ``a[i]`` and ``b[i]`` are one
    seed's value in each arm (the same seeds, in the same order); the
    one-sample t on ``d = a - b`` (module docstring)."""
    xa, xb = (np.array([_finite(name, f'seed {i}', v)
                        for i, v in enumerate(x)])
              for name, x in (('a', a), ('b', b)))
    if len(xa) != len(xb) or not len(xa):
        raise ValueError(f'paired: a and b need one value per seed each, '
                         f'got {len(xa)} and {len(xb)} values')
    d, n = xa - xb, len(xa)
    diff = float(d.mean())
    if n < 2:
        return Comparison('paired', diff, n, n,
                          reason='1 seed, fewer than 2 pairs')
    if _constant(d, float(max(np.abs(xa).max(), np.abs(xb).max()))):
        return Comparison('paired', diff, n, n,
                          reason='zero variance of the paired differences')
    return _t_test('paired', diff, n, n, float(d.std(ddof=1)) / math.sqrt(n),
                   n - 1)


def tost(comparison: Comparison, margin: float) -> Equivalence:
    """Two one-sided tests (Schuirmann 1987) of the equivalence of the
    arms of ``comparison`` (:func:`welch` or :func:`paired`, the same
    ``D``, ``SE`` and ``nu``) within ``margin``: ``H0: |delta| >= margin``
    is rejected when both ``t_low = (D + margin) / SE`` (upper tail) and
    ``t_high = (D - margin) / SE`` (lower tail) are significant; ``p =
    max(P(T_nu > t_low), P(T_nu < t_high))``. Equivalence is a verdict only
    through this test, never from a difference without one."""
    from scipy.stats import t as student_t
    if not (isinstance(margin, (int, float, np.integer, np.floating))
            and not isinstance(margin, (bool, np.bool_))
            and math.isfinite(margin) and margin > 0):
        raise ValueError(f'tost: margin must be a positive finite number, '
                         f'got {margin!r}')
    margin = float(margin)
    out = Equivalence(comparison.test, comparison.difference,
                      comparison.n_a, comparison.n_b, reason=comparison.reason,
                      margin=margin)
    if comparison.pvalue is None:
        return out
    se, df, diff = comparison.se, comparison.df, comparison.difference
    p = max(float(student_t.sf((diff + margin) / se, df)),
            float(student_t.cdf((diff - margin) / se, df)))
    half = float(student_t.ppf(1 - ALPHA, df)) * se
    return dataclasses.replace(out, se=se, df=df, pvalue=p, p_adj=p,
                               low=diff - half, high=diff + half)


# -------------------------------------------------------------- bootstrap
def _resampled_means(runs: List[np.ndarray], draws: int,
                     rng: np.random.Generator) -> np.ndarray:
    """``(draws,)`` arm means of hierarchical resamples: ``P`` runs drawn
    with replacement, then within each drawn run its ``T_p`` values with
    replacement; the arm mean is the mean of the run means."""
    lengths = np.array([len(r) for r in runs])
    values = np.zeros((len(runs), lengths.max()))
    for i, r in enumerate(runs):
        values[i, :len(r)] = r
    pick = rng.integers(len(runs), size=(draws, len(runs)))
    n = lengths[pick][..., None]  # (draws, P, 1)
    seeds = (rng.random((draws, len(runs), values.shape[1])) * n).astype(int)
    drawn = values[pick[..., None], seeds]
    drawn = np.where(np.arange(values.shape[1]) < n, drawn, 0.0)
    return (drawn.sum(-1) / n[..., 0]).mean(-1)


def bootstrap_interval(a: Sample, b: Sample, draws: int = BOOTSTRAP_DRAWS,
                       seed: int = SEED) -> Interval:
    """95 % hierarchical bootstrap interval of ``mean(a) - mean(b)`` (arm
    means as in :func:`welch`): each draw resamples each arm's runs, then
    each drawn run's transfer seeds, with replacement; the 2.5 / 97.5
    percentiles of the ``draws`` differences. Reproducible: a fixed
    ``seed``. Fewer than 2 runs in an arm is refused (ValueError), as
    :func:`welch` refuses to test it. It undercovers with few runs (module
    docstring); the tables use :func:`welch`'s interval."""
    runs = [_replicated('bootstrap_interval', name, s)
            for name, s in (('a', a), ('b', b))]
    rng = np.random.default_rng(seed)
    diffs = (_resampled_means(runs[0], draws, rng) -
             _resampled_means(runs[1], draws, rng))
    low, high = np.quantile(diffs, [ALPHA / 2, 1 - ALPHA / 2])
    return Interval(float(low), float(high), draws, seed)


# ----------------------------------------------------------- multiplicity
def adjust(pvalues: Sequence[Optional[float]], method: str) -> List[
        Optional[float]]:
    """Adjusted p values of one family: ``method`` ``'holm'`` (step-down,
    ``p_(i) -> max_{j <= i} min(1, (m - j + 1) p_(j))``) or ``'bh'``
    (Benjamini-Hochberg step-up, ``p_(i) -> min_{j >= i} min(1, m p_(j) /
    j)``), ``p_(1) <= ... <= p_(m)``. ``None`` entries (no test) stay None
    and do not count in ``m``."""
    if method not in CORRECTIONS:
        raise ValueError(f'adjust: method must be one of {list(CORRECTIONS)},'
                         f' got {method!r}')
    for i, p in enumerate(pvalues):
        if p is not None and (isinstance(p, (bool, np.bool_)) or not (
                isinstance(p, (int, float, np.integer, np.floating))
                and 0 <= p <= 1)):
            raise ValueError(f'adjust: p value {i} is {p!r}; p values must be '
                             'numbers in [0, 1] (or None: no test)')
    index = [i for i, p in enumerate(pvalues) if p is not None]
    p = np.array([pvalues[i] for i in index], dtype=float)
    m = len(p)
    order = np.argsort(p, kind='stable')
    if method == HOLM:
        adj = np.maximum.accumulate((m - np.arange(m)) * p[order])
    else:
        adj = np.minimum.accumulate((m / np.arange(m, 0, -1)) *
                                    p[order][::-1])[::-1]
    out: List[Optional[float]] = [None] * len(pvalues)
    for i, value in zip(np.array(index, dtype=int)[order], adj):
        out[i] = float(min(1.0, value))
    return out


def family(comparisons: Sequence[Test], method: str) -> List[Test]:
    """The tests of one family (a table: comparisons or equivalence tests)
    with ``p_adj`` by :func:`adjust`, ``correction`` and ``family_size``
    set."""
    adjusted = adjust([c.pvalue for c in comparisons], method)
    size = sum(p is not None for p in adjusted)
    return [dataclasses.replace(c, p_adj=p, correction=method,
                                family_size=size)
            for c, p in zip(comparisons, adjusted)]


def family_alpha(c: Test) -> float:
    """The level at which a cell of its family is a verdict whatever the
    other cells' p values: ``ALPHA / m`` under Holm and Benjamini-Hochberg
    (both need ``p < ALPHA / m`` of a lone effect among ``m`` tests; Holm
    relaxes it only for the later steps), ``ALPHA`` for a family of one
    (``correction`` ``'none'``)."""
    return ALPHA if c.correction == 'none' else ALPHA / c.family_size


def family_mdd(c: Comparison, power: float = POWER) -> Optional[float]:
    """The minimum detectable difference of a cell at the level its family
    applies (:func:`family_alpha`): :func:`minimum_detectable_difference`
    with ``alpha = ALPHA / m``; None without a test."""
    if c.pvalue is None:
        return None
    return minimum_detectable_difference(c.se, c.df, family_alpha(c), power)


# --------------------------------------------------------------- rankings
def _rank_scores(means: np.ndarray) -> np.ndarray:
    """``(..., arms, tasks)`` means -> ``(..., arms)`` ranks (module
    docstring)."""
    from scipy.stats import rankdata
    per_task = rankdata(-_snap(means), axis=-2, method='average')
    return rankdata(_snap(per_task.mean(-1)), axis=-1, method='average')


def ranks(means: Mapping[str, Sequence[float]]) -> Dict[str, float]:
    """``{arm: [mean per task]}`` (higher is better, the same tasks in the
    same order for every arm) -> ``{arm: rank}``: 1 the best, ties
    averaged, by the mean per-task rank (module docstring)."""
    arms = list(means)
    rows = [[_finite(arm, f'task {k}', v) for k, v in enumerate(means[arm])]
            for arm in arms]
    if len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError('ranks: every arm needs a mean for the same tasks, '
                         f'got {dict(zip(arms, map(len, rows)))}')
    return dict(zip(arms, map(float, _rank_scores(np.array(rows)))))


def _rank_runs(caller: str, samples: Mapping[str, Sequence[Sample]]
               ) -> Dict[str, List[List[np.ndarray]]]:
    """``{arm: [sample per task]}`` checked (the same tasks for every arm,
    at least 2 runs per arm and task) as ``{arm: [runs per task]}``."""
    arms = list(samples)
    sizes = {arm: len(samples[arm]) for arm in arms}
    if len(set(sizes.values())) != 1 or not sizes[arms[0]]:
        raise ValueError(f'{caller}: every arm needs a sample for the '
                         f'same tasks, got {sizes}')
    return {arm: [_replicated(caller, f'{arm} task {k}', s)
                  for k, s in enumerate(samples[arm])] for arm in arms}


def _rank_result(runs: Dict[str, List[List[np.ndarray]]],
                 drawn: np.ndarray) -> Dict[str, RankInterval]:
    """Each arm's rank of its means (:func:`ranks`) and the 2.5 / 97.5
    percentiles (lower / higher order statistic) of its ``drawn`` ranks
    ``(draws, arms)``."""
    point = ranks({arm: [float(np.mean([r.mean() for r in task]))
                         for task in tasks] for arm, tasks in runs.items()})
    low = np.quantile(drawn, ALPHA / 2, axis=0, method='lower')
    high = np.quantile(drawn, 1 - ALPHA / 2, axis=0, method='higher')
    return {arm: RankInterval(point[arm], float(lo), float(hi))
            for arm, lo, hi in zip(runs, low, high)}


def rank_intervals(samples: Mapping[str, Sequence[Sample]],
                   draws: int = RANK_DRAWS,
                   seed: int = SEED) -> Dict[str, RankInterval]:
    """``{arm: [sample per task]}`` -> ``{arm: RankInterval}``: the rank of
    the arms' means (:func:`ranks`) and its 95 % interval over ``draws``
    hierarchical bootstrap draws (:func:`bootstrap_interval`'s resampling,
    every arm and task independently, ``seed`` fixed). Undercovers with
    few runs, as :func:`bootstrap_interval` does; the tables use
    :func:`t_rank_intervals`."""
    runs = _rank_runs('rank_intervals', samples)
    rng = np.random.default_rng(seed)
    boot = np.stack([np.stack([_resampled_means(task, draws, rng)
                               for task in tasks], -1)
                     for tasks in runs.values()], 1)  # (draws, arms, tasks)
    return _rank_result(runs, _rank_scores(boot))


def _t_scale(runs: List[np.ndarray]) -> tuple:
    """``(M, SE, nu)`` of an arm's mean from its runs: ``M`` the mean of
    the per-run means ``m_p``, ``SE = sd(m_p) / sqrt(P)`` (0 when they are
    equal, :func:`_constant`), ``nu = P - 1``."""
    means = np.array([r.mean() for r in runs])
    scale = max(float(np.abs(r).max()) for r in runs)
    se = 0.0 if _constant(means, scale) else float(
        means.std(ddof=1)) / math.sqrt(len(means))
    return float(means.mean()), se, len(means) - 1


def t_rank_intervals(samples: Mapping[str, Sequence[Sample]],
                     draws: int = RANK_DRAWS,
                     seed: int = SEED) -> Dict[str, RankInterval]:
    """``{arm: [sample per task]}`` -> ``{arm: RankInterval}``: the rank of
    the arms' means (:func:`ranks`) and its 95 % interval from ``draws``
    draws of every arm's mean on every task from the t distribution of
    that mean, ``M + SE T_{P-1}`` (:func:`welch`'s per-run means, the
    pretraining run the unit; the small-sample correction the bootstrap
    lacks), independently, ``seed`` fixed; each draw ranked as the means
    are. Its coverage of the true rank is simulated in
    ``tests/test_stats.py`` at 2, 3 and 5 runs per arm. Fewer
    than 2 runs of an arm on a task is refused (ValueError)."""
    runs = _rank_runs('t_rank_intervals', samples)
    scales = np.array([[_t_scale(task) for task in tasks]
                       for tasks in runs.values()])  # (arms, tasks, 3)
    rng = np.random.default_rng(seed)
    t = rng.standard_t(scales[..., 2], size=(draws, ) + scales.shape[:2])
    return _rank_result(runs, _rank_scores(scales[..., 0] +
                                           scales[..., 1] * t))


# ------------------------------------------------- aggregates over tasks
def _scores(name: str, scores) -> np.ndarray:
    """``scores`` checked as a ``(runs, tasks)`` float array (at least 1
    run and 1 task, every value finite)."""
    rows = [[_finite(name, f'run {n} task {k}', v) for k, v in enumerate(r)]
            for n, r in enumerate(scores)]
    if not rows or len({len(r) for r in rows}) != 1 or not rows[0]:
        raise ValueError(f'{name}: scores are a (runs, tasks) matrix with a '
                         f'value per run and task, got {scores!r}')
    return np.array(rows)


def _iqm(x: np.ndarray) -> np.ndarray:
    """``(..., runs, tasks)`` -> ``(...)`` interquartile means."""
    from scipy.stats import trim_mean
    return trim_mean(x.reshape(*x.shape[:-2], -1), 0.25, axis=-1)


def _improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``(..., N, tasks)``, ``(..., M, tasks)`` -> ``(...)``."""
    a, b = x[..., :, None, :], y[..., None, :, :]
    return ((a > b) + 0.5 * (a == b)).mean((-3, -2)).mean(-1)


def _profile(x: np.ndarray, tau: float) -> np.ndarray:
    return (x > tau).mean((-2, -1))


def iqm(scores) -> float:
    """Interquartile mean of a ``(runs, tasks)`` matrix of normalised
    scores (Agarwal et al. 2021, Sec. 4.3): the mean of the middle 50 % of
    all ``N K`` values (25 % trimmed from each end, scipy's
    ``trim_mean``)."""
    return float(_iqm(_scores('iqm', scores)))


def probability_of_improvement(x, y) -> float:
    """``P(X > Y)`` of ``(N, tasks)`` and ``(M, tasks)`` score matrices
    (Agarwal et al. 2021, Sec. 4.3): per task the Mann-Whitney ``U / (N
    M)``, ``(1 / N M) sum_i sum_j S(x_i, y_j)`` with ``S`` 1 above, 1/2
    tied, 0 below, averaged over the tasks. Scores need not be normalised
    (only orders within a task count)."""
    x, y = _scores('x', x), _scores('y', y)
    if x.shape[1] != y.shape[1]:
        raise ValueError(f'probability_of_improvement: x has {x.shape[1]} '
                         f'tasks, y {y.shape[1]}')
    return float(_improvement(x, y))


def performance_profile(scores, taus: Sequence[float]) -> List[float]:
    """Run-score distribution of a ``(runs, tasks)`` matrix of normalised
    scores (Agarwal et al. 2021, Sec. 4.2): per ``tau`` the fraction of
    all ``N K`` runs whose score is above ``tau``."""
    x = _scores('performance_profile', scores)
    return [float(_profile(x, _finite('taus', f'tau {i}', tau)))
            for i, tau in enumerate(taus)]


def stratified_interval(statistic: str, *scores, tau: float = None,
                        draws: int = RANK_DRAWS,
                        seed: int = SEED) -> Interval:
    """95 % stratified bootstrap interval (Agarwal et al. 2021, Sec. 4.1)
    of ``statistic`` (``'iqm'``, ``'improvement'`` of the first score
    matrix over the second, ``'profile'`` at ``tau``) of ``(runs, tasks)``
    score matrices: each draw resamples the runs of every task of every
    matrix with replacement, independently (the tasks are the strata;
    runs of different arms are not paired); the 2.5 / 97.5 percentiles of
    the ``draws`` statistics, ``seed`` fixed. Every task of every matrix
    needs at least 2 runs."""
    fns = {'iqm': (_iqm, 1), 'improvement': (_improvement, 2),
           'profile': (lambda x: _profile(x, tau), 1)}
    if statistic not in fns:
        raise ValueError(f'stratified_interval: statistic must be one of '
                         f'{list(fns)}, got {statistic!r}')
    fn, count = fns[statistic]
    if len(scores) != count or (statistic == 'profile' and tau is None):
        raise ValueError(f'stratified_interval: {statistic!r} takes {count} '
                         'score matrices' + ' and a tau' * (
                             statistic == 'profile'))
    mats = [_scores(f'scores {i}', x) for i, x in enumerate(scores)]
    for i, x in enumerate(mats):
        if len(x) < 2:
            raise ValueError(f'stratified_interval: scores {i} has 1 run; '
                             'an interval needs at least 2 runs per arm')
    rng = np.random.default_rng(seed)
    drawn = [np.take_along_axis(x[None], rng.integers(
        len(x), size=(draws, ) + x.shape), 1) for x in mats]
    low, high = np.quantile(fn(*drawn), [ALPHA / 2, 1 - ALPHA / 2])
    return Interval(float(low), float(high), draws, seed)


# ------------------------------------------------------------- formatting
def mean_std(values: Sequence[float]) -> tuple:
    """``(mean, sample std)`` (ddof 1; std None below 2 values; both None
    without values)."""
    x = np.array([_finite('mean_std', f'value {i}', v)
                  for i, v in enumerate(values)])
    if not len(x):
        return None, None
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else None


def format_mean_std(mean: Optional[float], std: Optional[float],
                    digits: int = 1) -> str:
    """``'45.8 ± 0.8'`` (``'45.8'`` without std, ``'missing'`` without
    mean)."""
    if mean is None:
        return 'missing'
    return (f'{mean:.{digits}f}' if std is None else
            f'{mean:.{digits}f} ± {std:.{digits}f}')


def format_p(p: float) -> str:
    """``'0.19'`` (from 0.1), ``'0.0504'``, ``'0.004'`` (3 significant
    digits below 0.1: a p near ``ALPHA`` reads on the right side of it),
    ``'<0.001'``."""
    return '<0.001' if p < 0.001 else f'{p:.3g}' if p < 0.1 else f'{p:.2f}'


def format_cell(c: Comparison, digits: int = 1) -> str:
    """One table cell: ``'+2.8 [-0.6, 6.2], p_adj 0.19'`` (``p`` for a
    family of one); without a test the verdict and why, e.g. ``'+0.0, no
    verdict (zero variance on both sides)'``."""
    diff = f'{c.difference:+.{digits}f}'
    if c.pvalue is None:
        return f'{diff}, {c.verdict} ({c.reason})'
    p = 'p' if c.correction == 'none' else 'p_adj'
    return (f'{diff} [{c.low:.{digits}f}, {c.high:.{digits}f}], '
            f'{p} {format_p(c.p_adj)}')


def describe(columns: Mapping[str, Sequence[Comparison]],
             digits: int = 1, adjusted: bool = False) -> str:
    """The paragraph under a table of comparisons (one family;
    ``columns``: its cells by column label): the correction and family
    size, what a cell reads, and per column the range of the minimum
    detectable difference at 80 % power: at ``ALPHA`` before the family's
    adjustment, or with ``adjusted`` at the level the family applies
    (:func:`family_mdd`, ``ALPHA / m``)."""
    cells = [c for column in columns.values() for c in column]
    corrections = {c.correction for c in cells}
    if len(corrections) != 1:
        raise ValueError(f'describe: the cells of one table must come from '
                         f'one family, got corrections {sorted(corrections)}')
    correction = corrections.pop()
    size = sum(c.pvalue is not None for c in cells)
    how = ('p unadjusted (one test)' if correction == 'none' else
           f'p_adj: p adjusted by {CORRECTIONS[correction]} over the '
           f"table's {size} test{'s' * (size != 1)}")
    ranges = []
    for label, column in columns.items():
        mdd = [family_mdd(c) if adjusted else c.mdd for c in column
               if c.mdd is not None]
        if mdd:
            lo, hi = min(mdd), max(mdd)
            ranges.append(f'{label} {lo:.{digits}f}' + (
                '' if f'{lo:.{digits}f}' == f'{hi:.{digits}f}' else
                f'-{hi:.{digits}f}'))
        else:
            ranges.append(f'{label} none testable')
    level = (f'α {ALPHA} before adjustment' if not adjusted else
             f'α {ALPHA}' if correction == 'none' else
             f'α {ALPHA}/{size}, the family\'s level')
    return (f'Cells: difference [95 % interval of its t test], {how} '
            f'(two-sided; a verdict needs p_adj < {ALPHA}, otherwise no '
            'verdict: the design cannot tell the difference from 0). '
            'Minimum detectable difference at 80 % power (each cell\'s '
            f'test, {level}): ' + '; '.join(ranges) +
            ' (mmpos_stats/__init__.py).')
