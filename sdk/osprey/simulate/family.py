"""A workload *family*: whole workloads drawn from wide documented ranges, one per seed (issue 36).

The bench's named workloads (LLM gangs, the Alibaba trace, the seed's case) are three points; a scheduler
tuned on them need not carry over to the next. :func:`family_workload` draws every parameter of a workload
from ``random.Random(f"family/{seed}")`` (declared limits from ``family/{seed}/declared``, a stream of their
own, so the jobs are the same whatever the limit regime), so a seed names the same workload in every
process. :func:`draw_family` gives the parameters alone; the workload's ``notes`` print them.

Ranges (docs/scheduling.md, "Workload family"):

- **Cluster**: 4..256 nodes of 8 GPUs (32..2,048 GPUs), the node count log-uniform.
- **Job sizes**: a job is one node's worth or less (1, 2, 4 or 8 GPUs, weights size^-e with e uniform
  -0.5..2: from mostly single-GPU to mostly whole nodes) or, with the gang share g (uniform 0..0.9), a gang
  of 2, 4, 8, ... whole 8-GPU nodes up to a drawn fraction (1/8..1) of the cluster, weights size^-b (b
  uniform 0.3..1.5). A gang is never larger than the cluster.
- **Jobs**: 60..120, raised (to at most 200) until the jobs hold at least 6 cluster-fulls of GPUs
  (jobs x mean size >= 6 x GPUs): 120 single-GPU jobs on 2,048 GPUs would all run at once whatever the
  offered load, and nothing would queue. Where even 200 jobs are too few, g is raised as far as 0.95 so the
  mean size reaches 6 x GPUs / 200 (as close as the drawn gang sizes allow): big clusters get bigger jobs.
  Few jobs keep one simulation to seconds: Osprey's cost grows faster than linearly with the jobs (the
  bench runs 120 Osprey simulations of the family).
- **Durations**: log-normal (sigma uniform 0.5..2.5) or Pareto (alpha uniform 1.1..2.5), with the median
  log-uniform 10 min..6 h; clipped to 1 min..7 days.
- **Declared runtime limits**: ``exact`` (the duration), ``over`` (the duration x a factor log-uniform from 1
  to a drawn maximum of 1.5..10, per job; rounded up to whole hours in half the draws), ``none``
  (``declared_runtime_s=None``), or ``mixed`` (each job one of the three, with drawn fractions). Every limit
  also covers the longest worker startup (15 min): a user who knows the run time still declares a limit the
  job does not hit because one image pull was slow (Slurm ends a job at its limit).
- **Profiles**: well-tuned (GPU 85-97 %), input-bound (25-50 %), communication-bound (50-70 %) in drawn
  fractions; memory bandwidth a drawn 0.3-0.6 (+0..0.3) of utilization; interconnect latency a drawn base of
  50..400 µs (communication-bound jobs 3-8x it).
- **Arrivals**: ``poisson``; ``diurnal`` (rate proportional to 1 + A sin(2 pi t / day + phase), A uniform
  0.5..0.95); ``bursts`` (30-70 % of the jobs in a 20-90 min burst each morning); ``flood`` (one team
  submits 30-60 % of all jobs within 5-20 % of the span). The times are then stretched so the first job
  arrives at 0 and the last at exactly the span.
- **Offered load** uniform 0.7..1.5: the span is the jobs' GPU-time / (load x the cluster's GPUs), so the
  offered GPU-time is exactly load x the cluster's GPU-time over the arrival span.
- **Priority classes**: none (all 0), two (100/1000, 5-30 % at 1000) or three (0/100/1000: 5-25 % at 1000,
  10-50 % at 0).
- **Teams**: 1..6 (``team-a``...), shares proportional to rank^-s with s uniform 0..1.5 (skewed).
- **Checkpoints**: never in 30 % of the draws, else every 10..60 min (whole minutes).
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass

from osprey.simulate.model import Job, Workload
from osprey.simulate.workloads import GANG_NODE_GPUS, LLM_STARTUP, homogeneous_nodes

__all__ = ["FamilyDraw", "draw_family", "family_workload"]

DAY = 86400.0
NODES = (4, 256)
SINGLE_NODE_SIZES = (1, 2, 4, 8)
JOBS = (60, 120)
MAX_JOBS = 200
# Jobs x mean size >= this x the cluster's GPUs: enough jobs that the cluster fills and a queue forms.
CLUSTER_FULLS = 6
MAX_GANG_SHARE = 0.95
DURATION_CLIP = (60.0, 7 * DAY)
# The longest worker startup (LLM_STARTUP's stragglers): every declared limit covers it.
STARTUP_ALLOWANCE_S = LLM_STARTUP.straggler_high_s
ARRIVALS = ("poisson", "diurnal", "bursts", "flood")
DECLARED = ("exact", "over", "none", "mixed")
# (name, utilization range), as the LLM workload's profiles.
PROFILES = (
    ("well-tuned", (0.85, 0.97)),
    ("input-bound", (0.25, 0.50)),
    ("communication-bound", (0.50, 0.70)),
)


def _log_uniform(rng: random.Random, low: float, high: float) -> float:
    return math.exp(rng.uniform(math.log(low), math.log(high)))


def _fractions(rng: random.Random, count: int) -> tuple[float, ...]:
    """A uniform draw from the simplex (Dirichlet(1, ..., 1)): every mix equally likely."""
    weights = [rng.gammavariate(1.0, 1.0) for _ in range(count)]
    total = math.fsum(weights)
    return tuple(w / total for w in weights)


def _mean(sizes: tuple[int, ...], weights: tuple[float, ...]) -> float:
    return math.fsum(s * w for s, w in zip(sizes, weights, strict=True)) / math.fsum(weights)


@dataclass(frozen=True, slots=True)
class FamilyDraw:
    """The parameters of one family workload (ranges in the module docstring); :meth:`notes` prints them."""

    seed: int
    nodes: int
    jobs: int
    single_sizes: tuple[int, ...]
    single_weights: tuple[float, ...]
    gang_sizes: tuple[int, ...]
    gang_weights: tuple[float, ...]
    gang_share: float
    duration: str  # "lognormal" or "pareto"
    median_s: float
    spread: float  # lognormal: sigma; pareto: alpha
    declared: str  # one of DECLARED
    declared_mix: tuple[float, float, float]  # exact, over, none (mixed; else one of them is 1)
    over_max: float
    whole_hours: bool
    profile_mix: tuple[float, ...]
    bandwidth_low: float
    latency_us: float
    arrival: str  # one of ARRIVALS
    arrival_share: float  # diurnal: amplitude; bursts, flood: the share of jobs in them
    flooder: str  # flood: the team that floods; else ""
    load: float
    teams: tuple[tuple[str, float], ...]
    classes: tuple[tuple[int, float], ...]
    checkpoint_s: float

    @property
    def gpus(self) -> int:
        return self.nodes * GANG_NODE_GPUS

    @property
    def mean_size(self) -> float:
        single = _mean(self.single_sizes, self.single_weights)
        if not self.gang_sizes:
            return single
        return (1 - self.gang_share) * single + self.gang_share * _mean(self.gang_sizes, self.gang_weights)

    def notes(self) -> tuple[str, ...]:
        def mix(pairs: tuple[tuple[object, float], ...]) -> str:
            return ", ".join(f"{name} {100 * share:.0f} %" for name, share in pairs)

        spread = f"sigma {self.spread:.2f}" if self.duration == "lognormal" else f"alpha {self.spread:.2f}"
        gangs = f"{self.gang_sizes[0]}..{self.gang_sizes[-1]}" if self.gang_sizes else "none"
        limits = {
            "exact": "exact",
            "none": "none declared",
            "over": f"up to {self.over_max:.1f}x over{' in whole hours' if self.whole_hours else ''}",
            "mixed": "mixed: "
            + mix(
                tuple(
                    zip(("exact", f"up to {self.over_max:.1f}x over", "none"), self.declared_mix, strict=True)
                )
            ),
        }[self.declared]
        arrival = {
            "poisson": "poisson",
            "diurnal": f"diurnal (amplitude {self.arrival_share:.2f})",
            "bursts": f"morning bursts ({100 * self.arrival_share:.0f} % of the jobs)",
            "flood": f"{self.flooder} flooding ({100 * self.arrival_share:.0f} % of the jobs)",
        }[self.arrival]
        return (
            f"family draw {self.seed}: {self.jobs} jobs on {self.gpus} GPUs ({self.nodes} nodes of 8), "
            f"offered load {self.load:.2f}, arrivals {arrival}",
            f"sizes: mean {self.mean_size:.1f} GPUs; gangs {100 * self.gang_share:.0f} % ({gangs} GPUs)",
            f"durations: {self.duration}, median {self.median_s / 60:.0f} min, {spread}; declared limits {limits}",
            "profiles: " + mix(tuple(zip((p[0] for p in PROFILES), self.profile_mix, strict=True))),
            f"teams: {mix(self.teams)}; priority classes: {mix(self.classes) if len(self.classes) > 1 else 'none'}; "
            f"checkpoints: {'never' if not self.checkpoint_s else f'every {self.checkpoint_s / 60:.0f} min'}",
        )


def _sizes(rng: random.Random, nodes: int) -> tuple[tuple[int, ...], tuple[float, ...], float, float]:
    """Gang sizes and weights, the gang share, and the single-node exponent (drawn in this order)."""
    single_exponent = rng.uniform(-0.5, 2.0)
    gang_share = rng.uniform(0.0, 0.9)
    largest = max(2, min(nodes, math.floor(rng.uniform(1 / 8, 1.0) * nodes)))
    gang_exponent = rng.uniform(0.3, 1.5)
    gang_sizes = tuple(GANG_NODE_GPUS * 2**k for k in range(1, 10) if 2**k <= largest)
    return gang_sizes, tuple(s**-gang_exponent for s in gang_sizes), gang_share, single_exponent


def draw_family(seed: int) -> FamilyDraw:
    """The parameters of family workload ``seed`` (the module docstring gives every range)."""
    rng = random.Random(f"family/{seed}")
    nodes = round(_log_uniform(rng, *NODES))
    gang_sizes, gang_weights, gang_share, single_exponent = _sizes(rng, nodes)
    single_weights = tuple(s**-single_exponent for s in SINGLE_NODE_SIZES)
    single_mean = _mean(SINGLE_NODE_SIZES, single_weights)
    gang_mean = _mean(gang_sizes, gang_weights)
    gpus = nodes * GANG_NODE_GPUS
    # Contention: enough jobs that they fill the cluster CLUSTER_FULLS times; past MAX_JOBS, bigger jobs.
    wanted_mean = CLUSTER_FULLS * gpus / MAX_JOBS
    if (1 - gang_share) * single_mean + gang_share * gang_mean < wanted_mean and gang_mean > single_mean:
        gang_share = min(MAX_GANG_SHARE, (wanted_mean - single_mean) / (gang_mean - single_mean))
    mean = (1 - gang_share) * single_mean + gang_share * gang_mean
    jobs = min(MAX_JOBS, max(rng.randint(*JOBS), math.ceil(CLUSTER_FULLS * gpus / mean)))
    duration = "lognormal" if rng.random() < 0.6 else "pareto"
    median_s = _log_uniform(rng, 600.0, 6 * 3600.0)
    spread = rng.uniform(0.5, 2.5) if duration == "lognormal" else rng.uniform(1.1, 2.5)
    declared = rng.choice(DECLARED)
    mix = _fractions(rng, 3)
    declared_mix = mix if declared == "mixed" else tuple(float(d == declared) for d in DECLARED[:3])
    over_max = _log_uniform(rng, 1.5, 10.0)
    whole_hours = rng.random() < 0.5
    profile_mix = _fractions(rng, len(PROFILES))
    bandwidth_low = rng.uniform(0.3, 0.6)
    latency_us = _log_uniform(rng, 50.0, 400.0)
    arrival = rng.choice(ARRIVALS)
    arrival_share = {
        "poisson": lambda: 0.0,
        "diurnal": lambda: rng.uniform(0.5, 0.95),
        "bursts": lambda: rng.uniform(0.3, 0.7),
        "flood": lambda: rng.uniform(0.3, 0.6),
    }[arrival]()
    load = rng.uniform(0.7, 1.5)
    team_count = rng.randint(1, 6)
    skew = rng.uniform(0.0, 1.5)
    weights = [(rank + 1) ** -skew for rank in range(team_count)]
    teams = tuple((f"team-{chr(ord('a') + i)}", w / math.fsum(weights)) for i, w in enumerate(weights))
    flooder = rng.choice(teams)[0] if arrival == "flood" else ""
    regime = rng.choice(("none", "two", "three"))
    classes: tuple[tuple[int, float], ...] = ((0, 1.0),)
    if regime == "two":
        high = rng.uniform(0.05, 0.3)
        classes = ((100, 1 - high), (1000, high))
    elif regime == "three":
        high, low = rng.uniform(0.05, 0.25), rng.uniform(0.1, 0.5)
        classes = ((0, low), (100, 1 - high - low), (1000, high))
    checkpoint_s = 0.0 if rng.random() < 0.3 else 60.0 * rng.randint(10, 60)
    return FamilyDraw(
        seed=seed,
        nodes=nodes,
        jobs=jobs,
        single_sizes=SINGLE_NODE_SIZES,
        single_weights=single_weights,
        gang_sizes=gang_sizes,
        gang_weights=gang_weights,
        gang_share=gang_share,
        duration=duration,
        median_s=median_s,
        spread=spread,
        declared=declared,
        declared_mix=(declared_mix[0], declared_mix[1], declared_mix[2]),
        over_max=over_max,
        whole_hours=whole_hours,
        profile_mix=profile_mix,
        bandwidth_low=bandwidth_low,
        latency_us=latency_us,
        arrival=arrival,
        arrival_share=arrival_share,
        flooder=flooder,
        load=load,
        teams=teams,
        classes=classes,
        checkpoint_s=checkpoint_s,
    )


def _duration(draw: FamilyDraw, rng: random.Random) -> float:
    if draw.duration == "lognormal":
        value = rng.lognormvariate(math.log(draw.median_s), draw.spread)
    else:
        # Pareto's median is x_m * 2^(1/alpha): the scale that puts the median where it was drawn.
        value = draw.median_s / 2 ** (1 / draw.spread) * rng.paretovariate(draw.spread)
    return min(DURATION_CLIP[1], max(DURATION_CLIP[0], value))


def _arrivals(draw: FamilyDraw, span: float, rng: random.Random) -> list[tuple[float, bool]]:
    """``draw.jobs`` (time, flooding) pairs in [0, span], sorted, the first at 0 and the last at ``span``."""
    count = draw.jobs
    times: list[tuple[float, bool]] = []
    if draw.arrival == "diurnal":
        phase = rng.uniform(0, 2 * math.pi)
        amplitude = draw.arrival_share
        while len(times) < count:  # thinning: accept t with probability rate(t) / max rate
            t = rng.uniform(0, span)
            if rng.random() * (1 + amplitude) <= 1 + amplitude * math.sin(2 * math.pi * t / DAY + phase):
                times.append((t, False))
    elif draw.arrival == "bursts":
        period = min(DAY, span)
        days = max(1, int(span // period))
        length = min(rng.uniform(1200.0, 5400.0), 0.1 * period)
        morning = rng.uniform(8 / 24, 10 / 24) * period
        for _ in range(count):
            if rng.random() < draw.arrival_share:
                t = rng.randrange(days) * period + morning + rng.uniform(0, length)
                times.append((min(span, t), False))
            else:
                times.append((rng.uniform(0, span), False))
    elif draw.arrival == "flood":
        window = rng.uniform(0.05, 0.2) * span
        start = rng.uniform(0, span - window)
        for _ in range(count):
            flooding = rng.random() < draw.arrival_share
            times.append(
                (start + rng.uniform(0, window), True) if flooding else (rng.uniform(0, span), False)
            )
    else:
        # n uniform points on [0, span] are a Poisson process conditioned on n arrivals.
        times = [(rng.uniform(0, span), False) for _ in range(count)]
    times.sort()
    first, last = times[0][0], times[-1][0]
    stretch = span / (last - first) if last > first else 0.0
    return [((t - first) * stretch, flooding) for t, flooding in times]


def _declared(draw: FamilyDraw, duration: float, rng: random.Random) -> float | None:
    regime = rng.choices(("exact", "over", "none"), draw.declared_mix)[0]
    if regime == "none":
        return None
    if regime == "exact":
        return math.ceil(duration + STARTUP_ALLOWANCE_S)
    limit = duration * _log_uniform(rng, 1.0, draw.over_max) + STARTUP_ALLOWANCE_S
    return 3600.0 * math.ceil(limit / 3600.0) if draw.whole_hours else float(math.ceil(limit))


def family_workload(seed: int, *, jobs: int | None = None) -> Workload:
    """Family workload ``seed`` (named ``family-<seed>``), its draw in ``notes``; ``jobs`` overrides the drawn
    job count (quick tests), every other parameter stays as drawn."""
    draw = draw_family(seed)
    if jobs is not None:
        if jobs < 2:
            raise ValueError(f"a family workload needs at least 2 jobs, got {jobs}")
        draw = dataclasses.replace(draw, jobs=jobs)
    rng = random.Random(f"family/{seed}/jobs")
    declared_rng = random.Random(f"family/{seed}/declared")
    drafts = []
    for _ in range(draw.jobs):
        gang = draw.gang_sizes and rng.random() < draw.gang_share
        sizes, weights = (
            (draw.gang_sizes, draw.gang_weights) if gang else (draw.single_sizes, draw.single_weights)
        )
        size = rng.choices(sizes, weights)[0]
        duration = round(_duration(draw, rng), 3)
        profile = rng.choices(range(len(PROFILES)), draw.profile_mix)[0]
        drafts.append((size, duration, profile))
    offered = math.fsum(size * duration for size, duration, _ in drafts)
    span = offered / (draw.load * draw.gpus)
    arrivals = _arrivals(draw, span, rng)
    names, shares = [t for t, _ in draw.teams], [s for _, s in draw.teams]
    values, fractions = [c for c, _ in draw.classes], [f for _, f in draw.classes]
    out = []
    for index, ((size, duration, profile), (submit, flooding)) in enumerate(
        zip(drafts, arrivals, strict=True)
    ):
        utilization = rng.uniform(*PROFILES[profile][1])
        latency = rng.uniform(draw.latency_us, 2 * draw.latency_us) * (
            rng.uniform(3, 8) if profile == 2 else 1
        )
        out.append(
            Job(
                job_id=f"family-{index:04d}",
                submit_s=round(submit, 3),
                gpus=size,
                duration_s=duration,
                utilization=utilization,
                memory_bandwidth=min(
                    1.0, utilization * rng.uniform(draw.bandwidth_low, draw.bandwidth_low + 0.3)
                ),
                interconnect_latency_us=latency,
                share=draw.flooder if flooding else rng.choices(names, shares)[0],
                priority_class=rng.choices(values, fractions)[0],
                checkpoint_s=draw.checkpoint_s,
                declared_runtime_s=_declared(draw, duration, declared_rng),
            )
        )
    return Workload(f"family-{seed}", tuple(out), homogeneous_nodes(draw.gpus), LLM_STARTUP, draw.notes())
