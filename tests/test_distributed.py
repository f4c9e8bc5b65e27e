"""Distributed SDCA (practical DisDCA) on a real Dask cluster started by the tests.

The session fixture starts a LocalCluster of two worker processes on 127.0.0.1; every test has
a timeout and every wait inside ``fit`` one too.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from _synthetic import random_problem

from crfsdca.distributed import DatasetShard, WorkerLostError, fit, simulate
from crfsdca.io.modelfile import load_model
from crfsdca.solvers.monitor import Monitor
from crfsdca.solvers.sdca import SDCA, SDCAConfig

distributed = pytest.importorskip("distributed")
pytestmark = pytest.mark.timeout(300)

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_conll = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR, "conll2000", "train.txt.gz").exists(),
    reason="needs CRFSDCA_DATA_DIR with conll2000",
)


@pytest.fixture(scope="module")
def dask_client():
    simulate(random_problem(seed=0, n=4), 1, local_updates=2, max_rounds=1)  # warm numba
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            memory_limit="4GiB",
        ) as cluster,
        distributed.Client(cluster, direct_to_workers=True) as client,
    ):
        yield client


def problem_for_tests(n=24, seed=3):
    return random_problem(seed=seed, n=n, max_T=6, K=3, A=8)


def records(result):
    return [(r.oracle_calls, r.updates, r.primal, r.dual, r.gap) for r in result.trace.records]


def test_one_partition_is_serial_sdca_with_the_same_draws():
    problem = problem_for_tests()
    n = problem.n_sequences
    local = simulate(problem, 1, local_updates=n, max_rounds=5, tol=0.0, seed=7)
    config = SDCAConfig(tol=0.0, max_epochs=5, seed=7)
    state = SDCA(config).initial_state(problem)
    state.rng_state = np.random.default_rng(
        np.random.SeedSequence(7).spawn(1)[0]
    ).bit_generator.state
    serial = SDCA(config).solve(problem, Monitor(problem, "sdca", config), state)
    np.testing.assert_array_equal(local.weights, serial.weights)  # bit for bit
    assert local.trace.records[-1].oracle_calls == serial.trace.records[-1].oracle_calls == 5 * n
    assert local.trace.records[-1].gap == pytest.approx(serial.trace.records[-1].gap, rel=1e-9)


def test_w_stays_the_sum_of_the_partitions_contributions():
    problem = problem_for_tests()
    result = simulate(problem, 3, local_updates=5, max_rounds=30, tol=0.0, keep_partitions=True)
    total = np.add.reduce([p.committed_contribution() for p in result.partitions])
    assert np.max(np.abs(result.weights - total)) < 1e-12
    gaps = [r.gap for r in result.trace.records]
    assert gaps[-1] < gaps[0] / 10 and min(gaps) >= -1e-12


def test_practical_dual_never_decreases_and_beats_naive():
    """DisDCA's practical variant (scale P on a local copy) is safe: the dual rises every round.
    The naive variant (every step from the round's w, scale m P) needs more rounds."""
    problem = problem_for_tests(n=40, seed=8)
    opts = {"local_updates": 10, "max_rounds": 400, "tol": 1e-4, "seed": 2}
    practical = simulate(problem, 2, **opts)
    naive = simulate(problem, 2, variant="naive", **opts)
    duals = [r.dual for r in practical.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False))
    assert practical.stop_reason == "tol"
    assert naive.stop_reason != "tol" or naive.rounds > practical.rounds
    print(f"rounds to gap 1e-4: practical {practical.rounds}, naive {naive.rounds}")


def test_unscaled_summing_overshoots():
    """Summing unscaled local updates (scale 1) is not safe: with every partition taking large
    steps on its whole shard, the summed step overshoots and the dual falls."""
    problem = problem_for_tests(n=40, seed=8)
    unscaled = simulate(problem, 4, local_updates=10, max_rounds=6, tol=0.0, variant="unscaled")
    duals = [r.dual for r in unscaled.trace.records]
    assert any(b < a - 1e-9 for a, b in zip(duals, duals[1:], strict=False)), duals
    practical = simulate(problem, 4, local_updates=10, max_rounds=6, tol=0.0)
    duals = [r.dual for r in practical.trace.records]
    assert all(b >= a - 1e-12 for a, b in zip(duals, duals[1:], strict=False))


@pytest.mark.slow  # a local Dask cluster
@pytest.mark.parametrize("variant", ["practical", "adaptive"])
def test_cluster_run_equals_the_simulation_bit_for_bit(dask_client, variant):
    problem = problem_for_tests()
    opts = {"local_updates": 7, "max_rounds": 6, "tol": 0.0, "seed": 4, "variant": variant}
    remote = fit(problem, dask_client, 2, round_timeout=60, **opts)
    local = simulate(problem, 2, **opts)
    np.testing.assert_array_equal(remote.weights, local.weights)
    assert records(remote) == records(local)
    assert {i["pid"] for i in remote.info} != {os.getpid()}  # the work ran in the workers


@pytest.mark.slow  # a local Dask cluster
def test_trees_on_two_workers_equal_the_simulation_and_reach_the_serial_optimum(dask_client):
    from _reference import lbfgs_optimum
    from test_tree_oracle import tree_data

    from crfsdca.structures.tree import tree_problem

    problem = tree_problem(tree_data(seed=4, n=16, max_T=6, K=3, A=12, n_types=2))
    opts = {"local_updates": 8, "max_rounds": 2000, "tol": 1e-6, "seed": 3}
    remote = fit(problem, dask_client, 2, round_timeout=60, **opts)
    local = simulate(problem, 2, **opts)
    np.testing.assert_array_equal(remote.weights, local.weights)
    assert records(remote) == records(local)
    p_star = lbfgs_optimum(problem)
    last = remote.trace.records[-1]
    assert remote.stop_reason == "tol" and last.dual - 1e-10 <= p_star <= last.primal + 1e-10


@needs_conll
@pytest.mark.slow  # a local Dask cluster
def test_exact_gap_falls_on_a_conll_slice(dask_client):
    spec = DatasetShard("conll2000", 0, 1, data_dir=DATA_DIR, max_sequences=300)
    result = fit(spec, dask_client, 2, local_updates=150, max_rounds=8, tol=0.0, round_timeout=120)
    gaps = [r.gap for r in result.trace.records]
    assert result.rounds == 8 and len(gaps) == 9
    assert gaps[-1] < gaps[1] / 10
    assert all(g >= -1e-9 for g in gaps)


@pytest.mark.slow  # a local Dask cluster
def test_lost_worker_raises_then_resume_reaches_the_same_optimum(dask_client, tmp_path):
    problem = problem_for_tests(n=30, seed=5)
    opts = {"local_updates": 15, "tol": 1e-3, "seed": 1, "round_timeout": 120.0}
    info = {}

    def kill_partition_1(record):
        """Kill partition 1's worker once a checkpoint after round 0 is committed (a fresh start
        reproduces round 0's record exactly, timings aside: only later ones tell them apart)."""
        committed = tmp_path / "driver.json"
        if "killed" in info or not committed.exists():
            return
        if json.loads(committed.read_text())["round"] >= 1:
            info["killed"] = True
            os.kill(info["pids"][1], signal.SIGKILL)

    pids = dask_client.run(os.getpid)
    workers = sorted(dask_client.scheduler_info()["workers"])
    info["pids"] = [pids[a] for a in workers]
    with pytest.raises(WorkerLostError, match="partition 1") as lost:
        fit(
            problem,
            dask_client,
            2,
            max_rounds=1000,
            checkpoint_dir=str(tmp_path),
            checkpoint_seconds=0.0,
            callback=kill_partition_1,
            **opts,
        )
    # the death was seen as such, not waited out (a timeout names its TimeoutError)
    assert "TimeoutError" not in str(lost.value), lost.value
    dead = workers[1]  # wait for its replacement: never place an actor on the dead address
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        alive = set(dask_client.scheduler_info()["workers"])
        if len(alive) == 2 and dead not in alive:
            break
        time.sleep(0.05)
    dask_client.wait_for_workers(2, timeout=60)
    saved = json.loads((tmp_path / "driver.json").read_text())["records"]
    assert saved[-1]["extra"]["rounds"] >= 1  # killed after a checkpoint past round 0
    resumed = fit(
        problem, dask_client, 2, max_rounds=1000, checkpoint_dir=str(tmp_path), resume=True, **opts
    )
    straight = simulate(
        problem, 2, max_rounds=1000, **{k: opts[k] for k in opts if k != "round_timeout"}
    )
    assert resumed.stop_reason == straight.stop_reason == "tol"
    # the saved trace came back, timings included (a fresh start would time its rounds anew),
    # and the first new record is the round after the restored ones, not a restart
    records = [r.to_json() for r in resumed.trace.records]
    assert records[: len(saved)] == saved
    first_new, last_saved = records[len(saved)], saved[-1]
    assert first_new["extra"]["rounds"] == last_saved["extra"]["rounds"] + 1
    assert first_new["oracle_calls"] == last_saved["oracle_calls"] + 2 * opts["local_updates"]
    assert first_new["seconds"] > last_saved["seconds"]
    last = resumed.trace.records[-1]
    assert last.gap <= 1e-3 and straight.trace.records[-1].gap <= 1e-3
    assert abs(last.primal - straight.trace.records[-1].primal) <= 2e-3  # both certified


@pytest.mark.slow  # a local Dask cluster
def test_no_worker_processes_are_left_behind():
    psutil = pytest.importorskip("psutil")
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}  # e.g. the module's cluster
    with (
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        started = {p.pid for p in me.children(recursive=True)} - before
        assert started  # the workers were processes of their own
    deadline = time.monotonic() + 30
    left = started
    while left and time.monotonic() < deadline:
        left = {p.pid for p in me.children(recursive=True)} & started
        time.sleep(0.2)
    assert not left


@pytest.mark.slow  # a local Dask cluster
def test_cli_trains_on_a_local_cluster_and_reports_the_distributed_fields(tmp_path):
    import json

    from click.testing import CliRunner
    from test_checkpoint import synthetic_conll

    from crfsdca.cli.main import main
    from crfsdca.solvers.trace import read_trace

    data = synthetic_conll(tmp_path / "train.txt", n=60, seed=2)
    args = ["train", str(data), "--format", "conll", "--template", "conll", "--workers", "2"]
    args += [
        "--tol",
        "1e-3",
        "--epochs",
        "200",
        "--json",
        "-q",
        "--trace",
        str(tmp_path / "t.jsonl"),
    ]
    args += ["--model", str(tmp_path / "m.npz")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert (out["workers"], out["partitions"]) == (2, 2) and out["rounds"] >= 1
    assert out["stop_reason"] == "tol" and out["gap"] <= 1e-3
    assert out["seconds_communication"] >= 0 and out["local_updates"] == 30
    assert out["worker_peak_rss_mib"] > 0
    last = read_trace(tmp_path / "t.jsonl").records[-1]
    assert (last.gap, last.oracle_calls) == (out["gap"], out["oracle_calls"])
    evaluated = CliRunner().invoke(main, ["evaluate", str(tmp_path / "m.npz"), str(data), "--json"])
    assert evaluated.exit_code == 0, evaluated.output
    assert out["worker_threads"] is False and out["aggregation"] == "adaptive"
    threads = args[: args.index("--trace")] + [
        "--worker-threads",
        "--model",
        str(tmp_path / "t.npz"),
    ]
    result = CliRunner().invoke(main, threads)
    assert result.exit_code == 0, result.output
    same = json.loads(result.stdout.splitlines()[-1])
    assert same["worker_threads"] is True
    for key in ("gap", "primal", "dual", "oracle_calls", "rounds", "epochs"):
        assert same[key] == out[key], key  # the same partitions, in threads: bit for bit
    np.testing.assert_array_equal(
        load_model(tmp_path / "t.npz")[0]["weights"], load_model(tmp_path / "m.npz")[0]["weights"]
    )


def test_cli_distributed_misuse_is_one_line(tmp_path, monkeypatch):
    from click.testing import CliRunner
    from test_checkpoint import synthetic_conll

    from crfsdca.cli import distributed as cli_distributed
    from crfsdca.cli.main import main

    data = str(synthetic_conll(tmp_path / "train.txt", n=10))
    common = ["train", data, "--format", "conll", "--template", "conll"]
    result = CliRunner().invoke(main, [*common, "--partitions", "2"])
    assert result.exit_code == 2 and "--partitions applies to distributed runs" in result.stderr
    result = CliRunner().invoke(main, [*common, "--workers", "2", "--solver", "lbfgs"])
    assert result.exit_code == 2 and "--workers and --scheduler run --solver sdca" in result.stderr
    result = CliRunner().invoke(main, [*common, "--worker-threads"])
    assert result.exit_code == 2 and "--worker-threads applies to distributed runs" in result.stderr
    result = CliRunner().invoke(
        main, [*common, "--worker-threads", "--scheduler", "tcp://127.0.0.1:1"]
    )
    assert result.exit_code == 2 and "drop it or --scheduler" in result.stderr

    def missing():
        raise ImportError(cli_distributed.INSTALL_HINT)

    monkeypatch.setattr(cli_distributed, "require_dask", missing)
    result = CliRunner().invoke(main, [*common, "--workers", "2"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "crfsdca: error: distributed training needs Dask: pip install 'crfsdca[distributed]'"
    )


def test_cli_worker_threads_run_the_adaptive_aggregation_from_four_partitions(tmp_path):
    """``--workers 4 --worker-threads`` (no Dask): four partitions as threads, the adaptive
    aggregation, certified at --tol; the same run through ``simulate`` gives the same bits."""
    import json

    from click.testing import CliRunner
    from test_checkpoint import synthetic_conll

    from crfsdca.cli.main import main

    data = synthetic_conll(tmp_path / "train.txt", n=60, seed=2)
    args = ["train", str(data), "--format", "conll", "--template", "conll", "--workers", "4"]
    args += ["--worker-threads", "--tol", "1e-4", "--epochs", "300", "--json", "-q"]
    result = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.splitlines()[-1])
    assert (out["partitions"], out["aggregation"], out["worker_threads"]) == (4, "adaptive", True)
    assert out["stop_reason"] == "tol" and out["gap"] <= 1e-4
    again = CliRunner().invoke(main, [*args, "--model", str(tmp_path / "again.npz")])
    np.testing.assert_array_equal(
        load_model(tmp_path / "m.npz")[0]["weights"],
        load_model(tmp_path / "again.npz")[0]["weights"],
    )
    assert json.loads(again.stdout.splitlines()[-1])["gap"] == out["gap"]
