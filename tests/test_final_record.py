"""Every stop writes one final trace record of the exact state the solver returns.

Per solver and per stop reason (tol at an evaluation, tol certified between evaluations,
max_epochs between evaluations, time_limit, Ctrl-C): the last record's counters, primal, dual
and gap are those of ``result.weights`` / ``result.state``, and a ``tol`` stop reports gap <= tol.
"""

import json
import signal
import warnings

import numpy as np
import pytest
from _signals import sigint
from _synthetic import random_problem
from click.testing import CliRunner
from test_checkpoint import synthetic_conll

from crfsdca.cli.main import main
from crfsdca.errors import ConvergenceWarning
from crfsdca.io.modelfile import load_model
from crfsdca.solvers import SOLVERS
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.trace import read_trace

DUAL_SOLVERS = ("sdca", "oeg")
#: CRFsuite's algorithms but L-BFGS: no duality gap, so no tol stop; counters in the result
CRFSUITE_ONLY = ("l2sgd", "ap", "pa", "arow")
STOCHASTIC = ("sdca", "sag-nus", "sag-nus-skip", "oeg")
#: the baselines' step loops compile for 8-21 s each on a cold cache: the slow set has them
SLOW_ON_COLD = ("oeg", "sag-nus", "sag-nus-skip", "spdc-df")


def solvers(names):
    """``names`` sorted, those of :data:`SLOW_ON_COLD` in the slow set."""
    return [
        pytest.param(n, marks=pytest.mark.slow) if n in SLOW_ON_COLD else n for n in sorted(names)
    ]


def problem_for_tests():
    return random_problem(seed=5, n=30, max_T=6, K=3, A=8)


def solve(name, problem, callback=None, **options):
    cls = SOLVERS[name]
    config = cls.config_class(**options)
    monitor = Monitor(problem, name, config, callback=callback)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return cls(config).solve(problem, monitor), monitor


def returned_counters(name, result):
    if name == "lbfgs" or name in CRFSUITE_ONLY:
        return result.counters["oracle_calls"], result.counters["updates"]
    return result.state.oracle_calls, result.state.updates


def assert_last_record_is_returned_state(name, problem, result, monitor):
    last = result.trace.records[-1]
    assert (last.oracle_calls, last.updates) == returned_counters(name, result)
    assert last.epoch == last.oracle_calls / problem.n_sequences
    primal = problem.primal(result.weights)
    assert last.primal == pytest.approx(primal, rel=1e-12, abs=1e-15)
    if name in DUAL_SOLVERS:
        d, lam = result.state.dual, problem.regularization
        w = result.weights
        dual = d.entropies.sum() / problem.n_sequences - 0.5 * lam * float(w @ w)
        assert last.dual == pytest.approx(dual, rel=1e-12, abs=1e-15)
        np.testing.assert_array_equal(w, d.weights)
    if name in DUAL_SOLVERS or name.startswith("sag") or name == "lbfgs":
        assert last.gap == pytest.approx(last.primal - last.dual, rel=1e-12, abs=1e-15)
    if result.stop_reason == "tol":
        assert last.gap <= monitor.config.tol
    assert monitor.stop_reason == result.stop_reason
    # exactly one record per state: no duplicate of the last evaluation
    counters = [(r.oracle_calls, r.updates) for r in result.trace.records]
    assert len(counters) == len(set(counters))


@pytest.mark.parametrize("sampling", ["uniform", "importance", "gap", "gap-importance", "max"])
def test_certified_stop_between_evaluations_writes_the_final_record(sampling):
    """The regression of the certified-stop bug: with evaluations far apart, only the exact gap
    pass can stop the run; its state (and the n oracle calls of the pass) must be recorded."""
    problem = problem_for_tests()
    result, monitor = solve(
        "sdca", problem, sampling=sampling, tol=1e-10, max_epochs=400, eval_every=1000, seed=1
    )
    assert result.stop_reason == "tol"
    assert result.counters["exact_passes"] >= 1
    last = result.trace.records[-1]
    assert last.gap <= 1e-10
    assert last.oracle_calls == result.state.oracle_calls
    assert_last_record_is_returned_state("sdca", problem, result, monitor)


@pytest.mark.parametrize("name", solvers(set(SOLVERS) - set(CRFSUITE_ONLY)))
def test_tol_stop(name):
    problem = problem_for_tests()
    options = {"tol": 1e-8, "max_epochs": 2000 if name == "lbfgs" else 600, "eval_every": 3}
    if name == "lbfgs":
        options.pop("eval_every")
    result, monitor = solve(name, problem, **options)
    assert result.stop_reason == "tol"
    assert_last_record_is_returned_state(name, problem, result, monitor)


@pytest.mark.parametrize("name", solvers(SOLVERS))
def test_max_epochs_stop_between_evaluations(name):
    problem = problem_for_tests()
    options = {"tol": 0.0, "max_epochs": 7.5, "eval_every": 2}
    if name == "lbfgs":
        options = {"tol": 0.0, "max_epochs": 7}
    result, monitor = solve(name, problem, **options)
    assert result.stop_reason == "max_epochs"
    assert_last_record_is_returned_state(name, problem, result, monitor)
    if name != "lbfgs":
        assert result.trace.records[-1].epoch == pytest.approx(7.5, abs=1 / problem.n_sequences)


@pytest.mark.parametrize("name", solvers(SOLVERS))
def test_time_limit_stop(name):
    problem = problem_for_tests()
    result, monitor = solve(name, problem, tol=0.0, time_limit=1e-9)
    assert result.stop_reason == "time_limit"
    assert_last_record_is_returned_state(name, problem, result, monitor)


@pytest.mark.parametrize("name", solvers(set(SOLVERS) - {"lbfgs"}))
def test_ctrl_c_stop(name):
    """SIGINT during the run: the solver finishes the stretch under way and records it."""
    problem = problem_for_tests()
    seen = []

    def callback(record):
        seen.append(record)
        if len(seen) == 2:
            signal.raise_signal(signal.SIGINT)

    with sigint():  # Python's handler, even when pytest was started with SIGINT ignored
        result, monitor = solve(name, problem, callback=callback, tol=0.0, max_epochs=50)
    assert result.stop_reason == "interrupted"
    assert result.trace.records[-1].epoch < 50
    assert_last_record_is_returned_state(name, problem, result, monitor)


def test_an_ignored_sigint_stays_ignored_during_training():
    """Started with SIGINT ignored (a background job of a script), a run is not stopped by it
    and leaves the disposition as it found it (crfsdca/solvers/interrupts.py)."""
    problem = problem_for_tests()
    seen = []

    def callback(record):
        seen.append(record)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        signal.raise_signal(signal.SIGINT)

    with sigint(signal.SIG_IGN):
        result, _ = solve("sdca", problem, callback=callback, tol=0.0, max_epochs=3)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert result.stop_reason == "max_epochs" and len(seen) >= 3


def test_ctrl_c_inside_an_lbfgs_line_search(monkeypatch):
    """Interrupted between two accepted iterates: the record holds the last accepted iterate
    with every evaluation spent so far."""
    problem = problem_for_tests()
    original = problem.primal_and_gradient
    calls = []

    def interrupted(w):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return original(w)

    monkeypatch.setattr(problem, "primal_and_gradient", interrupted)
    result, monitor = solve("lbfgs", problem, tol=0.0, max_epochs=100)
    monkeypatch.setattr(problem, "primal_and_gradient", original)
    assert result.stop_reason == "interrupted"
    assert_last_record_is_returned_state("lbfgs", problem, result, monitor)


def test_cli_json_model_and_trace_agree_after_a_certified_stop(tmp_path):
    data = synthetic_conll(tmp_path / "train.txt", n=80, seed=3)
    model, trace = tmp_path / "m.npz", tmp_path / "t.jsonl"
    args = ["train", str(data), "--format", "conll", "--template", "conll", "-q", "--json"]
    args += ["--tol", "1e-6", "--eval-every", "1000", "--epochs", "500", "--seed", "2"]
    args += ["--model", str(model), "--trace", str(trace)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    last = read_trace(trace).records[-1]
    training = load_model(model)[1]["training"]
    assert summary["stop_reason"] == training["stop_reason"] == "tol"
    assert summary["gap"] <= 1e-6
    for key in ("epochs", "oracle_calls", "updates", "primal", "dual", "gap", "seconds"):
        field = "epoch" if key == "epochs" else key
        assert summary[key] == training[key] == getattr(last, field), key
    assert summary["oracle_calls"] > 80 * (summary["epochs"] - 1)  # the exact pass counted


@pytest.mark.parametrize("name", ["sdca", "lbfgs"])
@pytest.mark.parametrize("score_test", ["every", "end", "never"])
def test_the_test_set_is_scored_when_asked_and_the_certificate_always(name, score_test):
    """Every record holds the exact primal and gap; the test error is in every record, only in
    the last (the returned state's, equal to the error of its predictions) or in none."""
    from _synthetic import random_sequences

    from crfsdca.structures.problem import Problem

    train = problem_for_tests()
    test = random_sequences(9, n=20, max_T=6, K=3, A=8)
    problem = Problem(train=train.train, feature_map=train.feature_map, test=test)
    cls = SOLVERS[name]
    config = cls.config_class(tol=1e-6, max_epochs=40)
    monitor = Monitor(problem, name, config, score_test=score_test)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        result = cls(config).solve(problem, monitor)
    records = result.trace.records
    assert len(records) >= 3
    for r in records:  # the exact certificate at every evaluation
        assert np.isfinite(r.primal) and (name == "lbfgs" or np.isfinite(r.gap))
    scored = [not np.isnan(r.test_error) for r in records]
    expected = {"every": [True] * len(records), "end": [False] * (len(records) - 1) + [True]}
    assert scored == expected.get(score_test, [False] * len(records))
    if score_test != "never":
        error = np.mean(problem.test_oracle.predict(result.weights) != test.labels)
        assert 0 < error < 1 and records[-1].test_error == pytest.approx(error, rel=1e-12)
        # the scores the summaries report are those of the returned weights
        scores = monitor.final_test_scores()
        assert scores["token_accuracy"] == pytest.approx(1.0 - error, rel=1e-12)
    else:
        assert monitor.final_test_scores() is None
    with pytest.raises(ValueError, match="score_test must be one of every, end, never"):
        Monitor(problem, name, config, score_test="sometimes")


def test_cli_scores_the_test_set_at_the_end_unless_asked(tmp_path):
    data = synthetic_conll(tmp_path / "train.txt", n=60, seed=3)
    test = synthetic_conll(tmp_path / "test.txt", n=30, seed=4)
    args = ["train", str(data), "--test", str(test), "--format", "conll", "--template", "conll"]
    args += ["-q", "--json", "--epochs", "4", "--tol", "0", "--seed", "2"]
    runs = {}
    for name, extra in [("default", []), ("trace", []), ("trace-end", ["--score-test", "end"]),
                        ("every", ["--score-test", "every"])]:  # fmt: skip
        trace = tmp_path / f"{name}.jsonl"
        model = tmp_path / f"{name}.npz"
        options = [*extra, "--model", str(model)]
        if name != "default" and name != "every":
            options += ["--trace", str(trace)]
        result = CliRunner().invoke(main, [*args, *options], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        runs[name] = json.loads(result.stdout.splitlines()[-1])
        if trace.exists():
            scored = [not np.isnan(r.test_error) for r in read_trace(trace).records]
            assert scored == ([False] * (len(scored) - 1) + [True] if "end" in name else
                              [True] * len(scored)), name  # fmt: skip
    # the same run whatever is scored, and the same summary
    for name in ("trace", "trace-end", "every"):
        for key in ("primal", "gap", "test_token_accuracy", "oracle_calls"):
            assert runs[name][key] == runs["default"][key], (name, key)


def test_cli_summary_takes_the_final_records_scores(tmp_path, monkeypatch):
    """The printed test scores are the final record's (the returned weights'): the test set is
    not predicted a second time for the summary."""
    from crfsdca.estimators.model import SequenceCRF

    data = synthetic_conll(tmp_path / "train.txt", n=60, seed=3)
    test = synthetic_conll(tmp_path / "test.txt", n=30, seed=4)
    args = ["train", str(data), "--test", str(test), "--format", "conll", "--template", "conll"]
    args += ["-q", "--json", "--epochs", "4", "--tol", "0", "--seed", "2"]
    args += ["--trace", str(tmp_path / "t.jsonl"), "--model", str(tmp_path / "m.npz")]

    def second_scoring(self, data):
        raise AssertionError("the test set was scored again for the summary")

    monkeypatch.setattr(SequenceCRF, "score", second_scoring)
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    monkeypatch.undo()
    last = read_trace(tmp_path / "t.jsonl").records[-1]
    assert summary["test_token_accuracy"] == pytest.approx(1.0 - last.test_error, rel=1e-12)
