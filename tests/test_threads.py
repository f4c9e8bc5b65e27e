"""Multi-threaded SDCA (``crfsdca.solvers.threads``): threads that step at once on one shared w.

A threaded run is not reproducible bit for bit, so these tests check what holds whatever the
threads' timing: the certificate is exact (w is w_hat of the dual state at every evaluation,
even when a thread's updates of the shared w are lost), and the threaded optimum is the serial
one within the certified gaps, on chains, trees, junction trees and with the elastic net.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _reference import lbfgs_optimum
from _synthetic import random_problem
from test_junction_sdca import problem_of
from test_tree_solvers import tree_dataset

from crfsdca.kernels.numerics.threads import get_threads, max_threads, set_threads
from crfsdca.kernels.solvers import sdca_epoch
from crfsdca.kernels.solvers.team import Team
from crfsdca.solvers.local import LocalSDCA
from crfsdca.solvers.loop import run_loop
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig
from crfsdca.solvers.threads import BURSTS_PER_EPOCH, TeamSDCA, partition, step_threads
from crfsdca.structures.objectives import dual_value
from crfsdca.structures.problem import Problem
from crfsdca.structures.tree import tree_problem


def chain_problem(n=40, l1=0.0):
    base = random_problem(seed=3, n=n, max_T=6, K=3, A=8)
    return Problem(train=base.train, feature_map=base.feature_map, l1=l1, name="synthetic")


def solve(problem, threads, **options):
    config = SDCAConfig(threads=threads, **options)
    return SDCA(config).solve(problem, Monitor(problem, "sdca", config))


def certificate_from_dual(problem, state):
    """(P, D) recomputed from the dual state alone: w = w_hat(mu) from the marginals (with the
    elastic net, S_tau of it), the entropies from the stored logs."""
    d = state.dual
    v = problem.structure.weights_from_dual(d.log_node, d.log_edge)
    if problem.l1 > 0:
        tau = problem.l1 / problem.regularization
        v = np.sign(v) * np.maximum(np.abs(v) - tau, 0.0)
    entropies = problem.structure.entropies(d.log_node, d.log_edge)
    primal = problem.primal(v)
    dual = dual_value(
        problem.regularization, float(v @ v), float(entropies.sum()), problem.n_sequences
    )
    return primal, dual


def test_the_automatic_choice_takes_a_thread_per_thousand_examples():
    before = get_threads()
    try:
        set_threads(1)
        assert step_threads(0, 100_000) == 1
        set_threads(min(2, max_threads()))
        cores = get_threads()
        assert step_threads(0, 1999) == 1
        assert step_threads(0, 2000) == min(cores, 2)
        assert step_threads(3, 2) == 2  # asked for: capped at the examples only
        assert step_threads(1, 10_000) == 1
    finally:
        set_threads(before)


def test_the_threads_share_every_example_once():
    shares = partition(11, 3, seed=4)
    assert [s.size for s in shares] == [4, 4, 3]
    joined = np.concatenate(shares)
    assert np.array_equal(np.sort(joined), np.arange(11))
    assert all(np.all(np.diff(s) > 0) for s in shares)
    assert all(np.array_equal(a, b) for a, b in zip(shares, partition(11, 3, seed=4), strict=True))


@pytest.mark.parametrize("sampling", ["gap", "uniform", "importance", "gap-importance", "max"])
def test_the_threaded_optimum_is_the_serial_one_within_the_certified_gaps(sampling):
    problem = chain_problem()
    options = {"tol": 1e-9, "max_epochs": 400, "sampling": sampling, "line_search_tol": 1e-6}
    serial = solve(problem, 1, **options)
    threaded = solve(problem, 2, **options)
    assert threaded.stop_reason == serial.stop_reason == "tol"
    last = threaded.trace.records[-1]
    assert last.extra["threads"] == 2 and "threads" not in serial.trace.records[-1].extra
    p_star = lbfgs_optimum(problem)
    assert p_star - 1e-12 <= last.primal <= p_star + last.gap + 1e-12
    assert abs(last.primal - serial.trace.records[-1].primal) <= 2e-9
    primal, dual = certificate_from_dual(problem, threaded.state)
    assert primal == pytest.approx(last.primal, rel=1e-10)
    assert dual == pytest.approx(last.dual, rel=1e-10, abs=1e-13)


@pytest.mark.parametrize("epochs", [1, 2.5])
def test_a_team_of_threads_keeps_the_epoch_budget(epochs):
    """The threads take exactly the steps of --epochs (a thread that is ahead stops at its
    quota in the stretch that ends at the budget), as serial SDCA does."""
    problem = chain_problem(n=60)
    result = solve(problem, 2, tol=0.0, max_epochs=epochs, eval_every=0.7)
    assert result.stop_reason == "max_epochs"
    assert result.state.oracle_calls == result.state.updates == round(epochs * 60)
    assert result.trace.records[-1].extra["threads"] == 2


def test_lost_updates_of_the_shared_w_leave_the_certificate_exact(monkeypatch):
    """The first step of thread 1 in every stretch does not reach the shared w (its update is
    lost there): at the stretch's end w is off w_hat(mu), yet every recorded primal, dual and
    gap equals the ones recomputed from the dual state alone, and the run converges."""
    problem = chain_problem(n=60)
    config = SDCAConfig(threads=2, tol=1e-8, max_epochs=400, line_search_tol=1e-6)
    solver = SDCA(config)
    runner = TeamSDCA(problem, config, solver.initial_state(problem), threads=2)
    runner.drop[1] = 0
    seen = []
    merge = TeamSDCA._merge

    def watched(self):
        before = self._shared().copy()
        merge(self)
        seen.append(np.abs(before - self._shared()).max())

    monkeypatch.setattr(TeamSDCA, "_merge", watched)
    records = []
    monitor = Monitor(problem, "sdca", config, callback=records.append)
    result = run_loop(solver, runner, monitor)
    assert result.stop_reason == "tol" and result.trace.records[-1].gap <= 1e-8
    assert max(seen[:3]) > 1e-6  # the shared w did miss a first step of thread 1
    assert len(records) >= 3
    primal, dual = certificate_from_dual(problem, result.state)
    last = result.trace.records[-1]
    assert primal == pytest.approx(last.primal, rel=1e-10)
    assert dual == pytest.approx(last.dual, rel=1e-10, abs=1e-13)
    assert lbfgs_optimum(problem) <= last.primal <= lbfgs_optimum(problem) + last.gap + 1e-12


def test_every_record_of_a_run_with_lost_updates_is_a_true_certificate(monkeypatch):
    problem = chain_problem(n=50)
    config = SDCAConfig(threads=2, tol=1e-6, max_epochs=5, line_search_tol=1e-6)
    solver = SDCA(config)
    runner = TeamSDCA(problem, config, solver.initial_state(problem), threads=2)
    runner.drop[0] = 3
    checks = []

    def check(record):
        primal, dual = certificate_from_dual(problem, runner.state)
        checks.append((record.primal - primal, record.dual - dual, record.gap))

    monitor = Monitor(problem, "sdca", config, callback=check)
    with pytest.warns(UserWarning, match="max_epochs"):
        result = run_loop(solver, runner, monitor)
    assert len(checks) == len(result.trace.records) >= 5
    for d_primal, d_dual, gap in checks:
        assert abs(d_primal) <= 1e-10 * (1 + gap) and abs(d_dual) <= 1e-10 * (1 + gap)


@pytest.mark.slow  # each structure and loss compiles a step loop of its own for a team
def test_the_elastic_net_on_threads_reaches_the_serial_optimum():
    problem = chain_problem(n=40, l1=0.02)
    options = {"tol": 1e-9, "max_epochs": 600, "line_search_tol": 1e-6}
    serial = solve(problem, 1, **options)
    threaded = solve(problem, 2, **options)
    last = threaded.trace.records[-1]
    assert threaded.stop_reason == "tol" and last.gap <= 1e-9
    assert abs(last.primal - serial.trace.records[-1].primal) <= 2e-9
    assert last.extra["nonzero_weights"] < problem.feature_map.n_features
    primal, dual = certificate_from_dual(problem, threaded.state)
    assert primal == pytest.approx(last.primal, rel=1e-10)
    assert dual == pytest.approx(last.dual, rel=1e-10, abs=1e-13)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["tree", "second-order", "custom"])
def test_trees_and_junction_trees_on_threads_reach_the_serial_optimum(kind):
    problem = tree_problem(tree_dataset(n=60)) if kind == "tree" else problem_of(kind, n=60)
    serial = solve(problem, 1, tol=1e-9, max_epochs=1000, line_search_tol=1e-6)
    threaded = solve(problem, 2, tol=1e-6, max_epochs=1000, line_search_tol=1e-6)
    last, ref = threaded.trace.records[-1], serial.trace.records[-1]
    assert threaded.stop_reason == serial.stop_reason == "tol" and last.gap <= 1e-6
    assert abs(last.primal - ref.primal) <= last.gap + ref.gap + 1e-12
    primal, dual = certificate_from_dual(problem, threaded.state)
    assert primal == pytest.approx(last.primal, rel=1e-10)
    assert dual == pytest.approx(last.dual, rel=1e-10, abs=1e-13)


def test_one_thread_is_serial_sdca_bit_for_bit():
    problem = chain_problem()
    options = {"tol": 1e-6, "max_epochs": 50, "seed": 5}
    runner = SDCA(SDCAConfig(threads=1)).runner(problem, SDCA().initial_state(problem))
    assert type(runner) is LocalSDCA
    a, b = solve(problem, 1, **options), solve(problem, 1, **options)
    assert [r.primal for r in a.trace.records] == [r.primal for r in b.trace.records]
    assert np.array_equal(a.weights, b.weights)


def test_a_team_refuses_a_distributed_round():
    problem = chain_problem()
    config = SDCAConfig(threads=2)
    runner = TeamSDCA(problem, config, SDCA(config).initial_state(problem), threads=2)
    with pytest.raises(ValueError, match="serial SDCA only"):
        runner.take_steps(5, scale=2.0)


def test_the_step_loop_without_a_team_is_the_serial_loop():
    """A team of one thread that owns every example steps exactly as the serial loop."""
    problem = random_problem(seed=2, n=30, max_T=5, K=3, A=8)
    config = SDCAConfig(seed=1, sampling="uniform")
    states = [SDCA(config).initial_state(problem) for _ in range(2)]
    serial = LocalSDCA(problem, config, states[0])
    team = LocalSDCA(problem, config, states[1])
    draws = np.random.default_rng(0).random((45, 2))
    serial_args = serial.kernel_args(draws.copy(), -1.0)
    deltas = np.zeros((1, states[1].dual.weights.size))
    sums = np.array([states[1].dual.gap_estimates.sum()])
    member = Team(np.arange(30), 0, np.zeros(1, np.int64), sums, 45, 45, deltas, -1)
    team_args = team.kernel_args(draws.copy(), -1.0)._replace(team=member)
    assert sdca_epoch.run_steps(serial_args)[0] == sdca_epoch.run_steps(team_args)[0] == 45
    np.testing.assert_allclose(states[1].dual.weights, states[0].dual.weights, atol=1e-12)
    np.testing.assert_allclose(
        states[0].dual.weights - SDCA(config).initial_state(problem).dual.weights,
        deltas[0],
        atol=1e-12,
    )
    np.testing.assert_allclose(states[0].dual.log_edge, states[1].dual.log_edge, atol=1e-10)
    np.testing.assert_allclose(
        states[0].dual.gap_estimates, states[1].dual.gap_estimates, atol=1e-12
    )
    assert np.array_equal(serial_args.draws[:, 0], team_args.draws[:, 0])  # the same examples


@pytest.mark.slow
def test_the_structured_svm_on_threads_reaches_the_serial_optimum():
    """The hinge loss's block step writes w through the same move: its changes are recorded,
    and at the end w is w_hat(mu) of the marginals and the optimum the serial one."""
    problem = chain_problem(n=60)
    problem.loss = "hinge"
    # the epochs are a cap, not what is tested: one thread takes 1,443 epochs; two threads on
    # 30 sequences each, stepping on the same rows of w all the time, 560-2,500 (20 runs) and
    # over 3,000 once in a while
    options = {"tol": 1e-6, "max_epochs": 10_000, "eval_every": 10, "hinge_step": "pairwise"}
    serial = solve(problem, 1, **options)
    threaded = solve(problem, 2, **options)
    last, ref = threaded.trace.records[-1], serial.trace.records[-1]
    assert threaded.stop_reason == serial.stop_reason == "tol" and last.extra["threads"] == 2
    assert abs(last.primal - ref.primal) <= last.gap + ref.gap + 1e-12
    d = threaded.state.dual
    w_hat = problem.structure.weights_from_dual(d.log_node, d.log_edge)
    np.testing.assert_allclose(threaded.weights, w_hat, rtol=1e-9, atol=1e-10)


def test_a_team_checks_the_duality_gap_where_its_estimate_says_stop(monkeypatch):
    """Where the running gap estimate falls to the stop gap, a team checks P(w) - D(mu) (one
    primal, no exact pass of n oracle calls): a failed check aims the next stop lower by
    tol / gap (the ratio just measured) and the stretch goes on; a passed one certifies the
    run. The checked gap is the one recomputed from the dual state alone."""
    problem = chain_problem(n=60)
    config = SDCAConfig(threads=2, tol=1e-3)
    runner = TeamSDCA(problem, config, SDCA(config).initial_state(problem), threads=2)
    assert runner.stop_gap() == 1e-3
    checked = []

    def watched():
        gap = TeamSDCA.duality_gap(runner)
        primal, dual = certificate_from_dual(problem, runner.state)
        assert gap == pytest.approx(primal - dual, rel=1e-9, abs=1e-12)
        checked.append(gap)
        return gap

    monkeypatch.setattr(runner, "duality_gap", watched)
    runner.stop_scale = 1e6  # the estimate says stop at once: the checks fail (gap > tol)
    certified = runner.run_until_eval()
    assert checked and all(gap > 1e-3 for gap in checked) and not certified
    assert runner.stop_scale == pytest.approx(1e6 * np.prod([1e-3 / g for g in checked]))
    assert runner.counters["gap_checks"] == len(checked)
    assert runner.counters.get("exact_passes", 0) == 0  # no oracle calls beyond the steps
    assert runner.state.oracle_calls == runner.state.updates
    gap = TeamSDCA.duality_gap(runner)
    runner.cfg = SDCAConfig(threads=2, tol=2 * gap)  # now a check passes
    runner.stop_scale = 1e6
    assert runner.run_until_eval() and runner.certified
    assert checked[-1] <= 2 * gap
    serial = LocalSDCA(problem, config, SDCA(config).initial_state(problem))
    serial.exact_pass(check=True)
    assert serial.stop_gap() == 1e-3


def test_a_team_run_stops_on_a_checked_gap():
    """A team run to tol ends on its own check (no exact pass) and the returned state's
    recorded gap, recomputed from the dual state alone, is at most tol."""
    problem = chain_problem(n=60)
    result = solve(problem, 2, tol=1e-4, max_epochs=200, eval_every=50)
    assert result.stop_reason == "tol"
    assert result.counters["gap_checks"] >= 1 and result.counters.get("exact_passes", 0) == 0
    last = result.trace.records[-1]
    primal, dual = certificate_from_dual(problem, result.state)
    assert last.gap <= 1e-4
    assert last.gap == pytest.approx(primal - dual, rel=1e-8, abs=1e-12)
    assert last.epoch < 50  # between two scheduled evaluations: the check stopped it


def test_a_thread_stepping_alone_runs_at_most_a_burst_ahead(monkeypatch):
    """The worst schedule a loaded machine can give a team: in every burst thread 1 starts only
    once thread 0 has returned. Thread 0 then runs at most a burst ahead, and the run reaches
    tol in about the epochs of one core (one thread stepping alone on its share for a whole
    stretch pulls w towards its share's optimum and back, and stalls)."""
    original = sdca_epoch.run_steps
    turns = {}  # the burst's shared ``done`` array -> the event thread 0 sets when it returns
    lead = []

    def in_turn(args):
        team = args.team
        if team is None:
            return original(args)
        ended = turns.setdefault(id(team.done), (team.done, threading.Event()))[1]
        if team.rank == 1:
            ended.wait()
            lead.append(int(team.done[0]))  # thread 0's steps in the burst, all before 1's
        try:
            return original(args)
        finally:
            if team.rank == 0:
                ended.set()

    monkeypatch.setattr(sdca_epoch, "run_steps", in_turn)
    problem = chain_problem(n=60)
    result = solve(problem, 2, tol=1e-4, max_epochs=100, eval_every=5)
    serial = solve(problem, 1, tol=1e-4, max_epochs=100, eval_every=5)
    assert result.stop_reason == "tol" and serial.stop_reason == "tol"
    assert lead and max(lead) <= max(2, 60 // BURSTS_PER_EPOCH)
    assert result.trace.records[-1].epoch <= 2 * serial.trace.records[-1].epoch


def test_a_team_draws_half_its_steps_from_the_gap_law_unless_told():
    """Where ``non_uniformity`` is not given, one thread draws 0.8 of its steps from the gap
    law and a team 0.5 (concurrent steps drawn from it lag near the end: on CoNLL-2000 to 1e-4
    28-34 epochs with 0.8, 20.7 with 0.5); a given value is every runner's, and what the step
    loop reads."""
    problem = chain_problem(n=60)
    for given, team_value, serial_value in ((None, 0.5, 0.8), (0.9, 0.9, 0.9)):
        config = SDCAConfig(threads=2, non_uniformity=given)
        team = TeamSDCA(problem, config, SDCA(config).initial_state(problem), threads=2)
        serial = LocalSDCA(problem, config, SDCA(config).initial_state(problem))
        assert team.non_uniformity == team_value and serial.non_uniformity == serial_value
        assert team.params(-1.0).non_uniformity == team_value
        assert team._calls([np.zeros((0, 2))] * 2, 0, -1.0)[1].params.non_uniformity == team_value
        assert serial.params(-1.0).non_uniformity == serial_value
