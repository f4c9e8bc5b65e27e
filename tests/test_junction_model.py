"""Second-order chains and custom junction trees through SequenceCRF and crfsdca.CRF(order=2).

Marginals and MAP labels are checked against enumeration of every labelling (at most 6 nodes),
model files for exact round trips, and data of another graph kind for one clear GraphError.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

import crfsdca
from crfsdca.errors import GraphError, ModelFormatError
from crfsdca.estimators.model import SequenceCRF
from crfsdca.features.attributes import make_encoder
from crfsdca.io import AttributeCorpus
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.structures.graphs import chain_graph
from crfsdca.structures.junction import junctions_from_cliques, second_order_data
from crfsdca.structures.tree import TreeData

LENGTHS = [6, 1, 2, 3, 5, 4]


def corpus(seed, K=3, lengths=LENGTHS):
    """Random attribute sequences of the given lengths; every label appears."""
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c", "d", "e"]
    attributes, labels = [], []
    for T in lengths:
        attributes.append(
            [[(f"w:{rng.choice(words)}", 1.0), ("x", float(rng.normal()))] for _ in range(T)]
        )
        labels.append([f"L{k}" for k in rng.integers(0, K, T)])
    labels[0][:K] = [f"L{k}" for k in range(K)]
    return AttributeCorpus(attributes=attributes, labels=labels)


def encoded(seed):
    raw = corpus(seed)
    encoder = make_encoder("crfsuite")
    return raw, encoder, encoder.fit_transform(raw)


def custom_junctions(nodes):
    """Skip-chain junction trees: adjacent pairs (type 0), pairs two apart (type 1) and a
    trigram on the first three nodes (type 2); cliques listed last node first."""
    cliques, factors = [], []
    for T in nodes.lengths.tolist():
        if T <= 2:
            cliques.append([tuple(range(T))[::-1]])
        else:
            cliques.append([(t + 2, t + 1, t) for t in range(T - 2)])
        fs = [((t, t + 1), 0) for t in range(T - 1)] + [((t, t + 2), 1) for t in range(T - 2)]
        factors.append(fs + ([((0, 1, 2), 2)] if T >= 3 else []))
    return junctions_from_cliques(nodes, cliques, factors, factor_arities=(2, 2, 3))


def enumerate_labellings(node, graph, factor):
    """(marginals (T, K), best labelling) by visiting all K**T labellings."""
    T, K = node.shape
    labellings = list(itertools.product(range(K), repeat=T))
    log_p = np.array(
        [
            sum(node[v, ys[v]] for v in range(T))
            + sum(factor(t)[tuple(ys[s] for s in scope)] for scope, t in graph.factors)
            for ys in labellings
        ]
    )
    p = np.exp(log_p - np.logaddexp.reduce(log_p))
    marginals = np.zeros((T, K))
    for prob, ys in zip(p, labellings, strict=True):
        marginals[np.arange(T), ys] += prob
    return marginals, labellings[int(np.argmax(log_p))]


def node_scores(model, raw, encoder, i):
    """Attribute and bias scores (T, K) of example i (bias: every node, first, last)."""
    fm, w = model.feature_map_, model.weights_
    emission = fm.emission(w)
    node = np.array(
        [sum(v * emission[encoder.vocabulary[a]] for a, v in item) for item in raw.attributes[i]]
    )
    if fm.n_bias_rows:
        bias = fm.bias(w)
        node += bias[0]
        node[0] += bias[1]
        node[-1] += bias[2]
    return node


def check_against_enumeration(model, raw, encoder, data, junctions):
    fm, w = model.feature_map_, model.weights_
    pred, all_marginals = model.predict(data), model.node_marginals(data)
    offsets = junctions.seq_offsets
    for i, graph in enumerate(junctions.graphs):
        assert graph.n_nodes <= 6
        want, best = enumerate_labellings(
            node_scores(model, raw, encoder, i), graph, lambda t: fm.factor(w, t)
        )
        got = model.predict_marginals(data, i)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
        np.testing.assert_allclose(all_marginals[offsets[i] : offsets[i + 1]], want, atol=1e-10)
        assert pred[offsets[i] : offsets[i + 1]].tolist() == list(best)


def test_second_order_marginals_and_map_equal_enumeration():
    raw, encoder, nodes = encoded(0)
    model = SequenceCRF(solver="lbfgs", order=2, max_epochs=15).fit(nodes)
    assert (model.graph_, model.order_, model.feature_map_.factor_arities) == (
        "junction",
        2,
        (2, 3),
    )
    junctions = second_order_data(nodes)
    for data in (nodes, junctions):  # plain sequences are read as second-order chains
        check_against_enumeration(model, raw, encoder, data, junctions)
    model.weights_ = np.random.default_rng(1).normal(size=model.feature_map_.n_features)
    check_against_enumeration(model, raw, encoder, nodes, junctions)


def test_custom_junction_marginals_and_map_equal_enumeration():
    raw, encoder, nodes = encoded(2)
    data = custom_junctions(nodes)
    model = SequenceCRF(solver="sdca", n_bias_rows=0, tol=1e-6).fit(data)
    assert (model.graph_, model.order_, model.feature_map_.factor_arities) == (
        "junction",
        None,
        (2, 2, 3),
    )
    assert model.result_.trace.records[-1].gap <= 1e-6
    model.weights_ = np.random.default_rng(3).normal(size=model.feature_map_.n_features)
    check_against_enumeration(model, raw, encoder, data, data)


def test_order2_on_sequences_is_the_junction_model_of_second_order_chains():
    _, _, nodes = encoded(4)
    from_sequences = SequenceCRF(solver="lbfgs", order=2, max_epochs=10).fit(nodes, nodes)
    from_junctions = SequenceCRF(solver="lbfgs", max_epochs=10).fit(
        second_order_data(nodes), second_order_data(nodes)
    )
    assert from_junctions.order_ == 2
    np.testing.assert_array_equal(from_sequences.weights_, from_junctions.weights_)
    scores = from_sequences.score(nodes)
    assert scores == from_junctions.score(second_order_data(nodes))
    assert 0.0 < scores["token_accuracy"] <= 1.0


@pytest.mark.parametrize("kind", ["second-order", "custom"])
def test_save_load_round_trip_is_exact(tmp_path, kind):
    _, _, nodes = encoded(5)
    data = second_order_data(nodes) if kind == "second-order" else custom_junctions(nodes)
    model = SequenceCRF(solver="lbfgs", max_epochs=10).fit(data)
    model.save(str(tmp_path / "m.npz"))
    header = load_model(tmp_path / "m.npz")[1]
    order, arities = (2, [2, 3]) if kind == "second-order" else (None, [2, 2, 3])
    assert (header["graph"], header["order"], header["factor_arities"]) == (
        "junction",
        order,
        arities,
    )
    assert header["n_edge_types"] == 0 and header["n_bias_rows"] == 3
    loaded = SequenceCRF.load(str(tmp_path / "m.npz"))
    assert (loaded.graph_, loaded.order_) == ("junction", order)
    assert loaded.feature_map_ == model.feature_map_
    np.testing.assert_array_equal(loaded.weights_, model.weights_)
    np.testing.assert_array_equal(loaded.predict(data), model.predict(data))
    np.testing.assert_array_equal(loaded.node_marginals(data), model.node_marginals(data))


def test_first_cli_header_format_reads_as_second_order(tmp_path):
    """``train --order 2`` files written before SequenceCRF saved them: graph chain, order 2."""
    _, _, nodes = encoded(6)
    model = SequenceCRF(solver="lbfgs", order=2, max_epochs=5).fit(nodes)
    model.save(str(tmp_path / "new.npz"))
    arrays, header = load_model(tmp_path / "new.npz")
    header = {k: v for k, v in header.items() if k not in ("format", "format_version")}
    header.pop("crfsdca_version", None)
    save_model(tmp_path / "old.npz", arrays, {**header, "graph": "chain"})
    old = SequenceCRF.load(str(tmp_path / "old.npz"))
    assert (old.graph_, old.order_) == ("junction", 2)
    np.testing.assert_array_equal(old.predict(nodes), model.predict(nodes))
    for bad, message in [
        ({"factor_arities": [2]}, r"second-order model has factor_arities \[2, 3\]"),
        ({"order": 3}, "a junction model has order 2 or null; got 3"),
        ({"graph": "tree", "order": 2}, "a tree model has order 1; got order 2"),
        ({"factor_arities": []}, r"the factor sizes \(factor_arities\) must be a non-empty list"),
    ]:
        save_model(tmp_path / "bad.npz", arrays, {**header, **bad})
        with pytest.raises(ModelFormatError, match=message):
            SequenceCRF.load(str(tmp_path / "bad.npz"))


def test_a_model_predicts_only_data_of_its_kind():
    _, _, nodes = encoded(7)
    trees = TreeData(nodes, tuple(chain_graph(T) for T in nodes.lengths.tolist()))
    custom = custom_junctions(nodes)
    second = SequenceCRF(solver="lbfgs", order=2, max_epochs=3).fit(nodes)
    skip = SequenceCRF(solver="lbfgs", max_epochs=3).fit(custom)
    chain = SequenceCRF(solver="lbfgs", max_epochs=3).fit(nodes)
    tree = SequenceCRF(solver="lbfgs", max_epochs=3).fit(trees)
    with pytest.raises(GraphError, match="trained on second-order chains; got trees"):
        second.predict(trees)
    with pytest.raises(GraphError, match=r"factor arities \(2, 2, 3\); the feature map has"):
        second.predict(custom)
    with pytest.raises(GraphError, match="custom junction trees; got chains .*JunctionData"):
        skip.predict(nodes)
    with pytest.raises(GraphError, match="trained on chains; got junction trees"):
        chain.predict(custom)
    with pytest.raises(GraphError, match="trained on trees; got junction trees"):
        tree.node_marginals(second_order_data(nodes))
    with pytest.raises(GraphError, match="order=2 trains second-order chains; got trees"):
        SequenceCRF(order=2).fit(trees)
    with pytest.raises(ValueError, match="order must be 1 .* or 2 .*; got 3"):
        SequenceCRF(order=3)
    with pytest.raises(ValueError, match="second-order chains train the dense model"):
        SequenceCRF(solver="lbfgs", order=2, all_possible_transitions=False).fit(nodes)


# -- crfsdca.CRF(order=2) on feature dicts ----------------------------------------------------


def period_data(n=6):
    """One repeated word labelled A A B B A A B B: each label is fixed by the two before it,
    which position-free first-order scores cannot express; the first two tokens are marked."""
    X = [[{"w": "x", "first": t == 0, "second": t == 1} for t in range(8)] for _ in range(n)]
    y = [list("AABBAABB") for _ in range(n)]
    return X, y


def test_crf_order2_fits_what_order1_cannot_and_saves(tmp_path):
    X, y = period_data()
    path = str(tmp_path / "o2.npz")
    crf = crfsdca.CRF(order=2, tol=1e-6, model_filename=path).fit(X, y, X_dev=X, y_dev=y)
    assert crf.training_log_[-1].test_error == 0.0  # the dev set is read as second-order chains
    first = crfsdca.CRF(tol=1e-6).fit(X, y)
    assert crf.graph_ == "junction" and crf.n_edge_types_ == 0
    assert crf.predict(X) == y and crf.score(X, y) == 1.0
    assert first.score(X, y) <= 0.75
    assert set(crf.transition_features_) <= {(a, b) for a in "AB" for b in "AB"}
    marginals = crf.predict_marginals(X)
    for seq, labels in zip(marginals, y, strict=True):
        for p, gold in zip(seq, labels, strict=True):
            assert sum(p.values()) == pytest.approx(1.0, abs=1e-12) and max(p, key=p.get) == gold
    loaded = crfsdca.CRF(model_filename=path)
    assert loaded.predict_marginals(X) == marginals and loaded.graph_ == "junction"
    assert pickle.loads(pickle.dumps(crf)).predict_marginals(X) == marginals
    assert crf.predict([X[0][:3], [], X[1]]) == [y[0][:3], [], y[1]]


def test_crf_order2_is_sequence_crf_order2_on_the_encoded_data():
    from sklearn.base import clone

    from crfsdca.features.featuredicts import FeatureDictEncoder

    rng = np.random.default_rng(8)
    X = [[{"w": str(rng.choice(list("abcd"))), "x": float(rng.normal())} for _ in range(T)]
         for T in LENGTHS]  # fmt: skip
    y = [[str(rng.choice(["P", "Q", "R"])) for _ in x] for x in X]
    crf = crfsdca.CRF(algorithm="lbfgs", order=2, max_iterations=10).fit(X, y)
    assert crf.get_params()["order"] == 2 and clone(crf).order == 2
    encoder = FeatureDictEncoder()
    data = encoder.fit_transform(X, y)
    model = SequenceCRF(solver="lbfgs", n_bias_rows=0, order=2, **crf._solver_options())
    model.fit(data)
    probs = np.array(
        [[p[k] for k in model.label_names_] for s in crf.predict_marginals(X) for p in s]
    )
    np.testing.assert_array_equal(probs, model.node_marginals(data))
    names = model.label_names_
    assert sum(crf.predict(X), []) == [names[k] for k in model.predict(data).tolist()]


@pytest.mark.filterwarnings("ignore:sdca stopped by max_epochs")
def test_crf_order2_errors():
    X, y = period_data(2)
    parents = [[-1, *range(7)] for _ in X]
    with pytest.raises(GraphError, match="order=2 trains second-order chains .* drop graphs="):
        crfsdca.CRF(order=2).fit(X, y, graphs=parents)
    with pytest.raises(ValueError, match="order must be 1 .* or 2 .*; got 3"):
        crfsdca.CRF(order=3).fit(X, y)
    with pytest.raises(ValueError, match="all_possible_states=False: second-order CRFs train"):
        crfsdca.CRF(algorithm="lbfgs", order=2, all_possible_states=False).fit(X, y)
    crf = crfsdca.CRF(order=2, max_iterations=5).fit(X, y)
    with pytest.raises(GraphError, match=r"second-order chains \(order=2\).* drop graphs="):
        crf.predict(X, graphs=parents)
    with pytest.raises(ValueError, match="continues chain models; fit a second-order CRF"):
        crf.partial_fit(X, y)
