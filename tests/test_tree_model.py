"""Tree-structured CRFs through the public API: crfsdca.CRF(graphs=...) and SequenceCRF.

Marginals and MAP labels are checked against enumeration of every labelling, a chain given as
trees against the chain model, and save/load for exact round trips.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

import crfsdca
from crfsdca.errors import GraphError, ModelFormatError
from crfsdca.estimators.crfsuite_format import export_crfsuite
from crfsdca.estimators.model import SequenceCRF
from crfsdca.features.attributes import make_encoder
from crfsdca.io import AttributeCorpus
from crfsdca.io.modelfile import load_model, save_model
from crfsdca.structures.graphs import Tree, chain_graph
from crfsdca.structures.tree import TreeData, trees_from_parents

WORDS = ["the", "a", "dog", "cat", "barks", "sleeps", "here", "loudly"]
LABELS = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "barks": "VERB"}


def sentence_data():
    """Four sentences with heads; edge type 0 when the head is left of the word, else 1."""
    sentences = [
        [("the", "DET", 1), ("dog", "NOUN", 2), ("barks", "VERB", -1)],
        [("dogs", "NOUN", 1), ("bark", "VERB", -1), ("loudly", "ADV", 1)],
        [("a", "DET", 1), ("cat", "NOUN", 2), ("sleeps", "VERB", -1), ("here", "ADV", 2)],
        [("cats", "NOUN", 1), ("sleep", "VERB", -1)],
    ]
    X = [[{"w": w, "suffix": w[-2:], "len": len(w) / 5} for w, _, _ in s] for s in sentences]
    y = [[label for _, label, _ in s] for s in sentences]
    graphs = [
        Tree(
            np.array([h for _, _, h in s]), np.array([int(h > t) for t, (_, _, h) in enumerate(s)])
        )
        for s in sentences
    ]
    return X, y, graphs


def random_tree_data(seed, n=6, K=3, max_nodes=7):
    """Feature-dict sequences of 2..max_nodes tokens, random forests with two edge types."""
    rng = np.random.default_rng(seed)
    labels = [f"L{k}" for k in range(K)]
    X, y, parents, types = [], [], [], []
    for i in range(n):
        T = int(rng.integers(2, max_nodes + 1)) if i else max_nodes
        perm = rng.permutation(T)
        p = np.full(T, -1)
        for rank in range(1, T):
            p[perm[rank]] = perm[rng.integers(0, rank)]
        if T > 3 and i % 2:
            p[perm[T - 1]] = -1  # a forest
        X.append(
            [
                {
                    "w": str(rng.choice(WORDS)),
                    "x": float(rng.normal()),
                    "b": bool(rng.random() < 0.5),
                }
                for _ in range(T)
            ]
        )
        y.append([labels[k] for k in rng.integers(0, K, T)])
        parents.append(p)
        types.append(rng.integers(0, 2, T))
    y[0] = labels[:] + [labels[0]] * (len(y[0]) - K)  # every label appears
    return X, y, trees_from_parents(parents, types)


def token_attributes(token):
    """(attribute name, value) pairs of a flat feature dict, as python-crfsuite names them."""
    out = []
    for key, value in token.items():
        if isinstance(value, str):
            out.append((f"{key}:{value}", 1.0))
        else:
            out.append((key, float(value)))
    return out


def enumerate_labellings(node_score, edge_score, tree):
    """(marginals (n, K), best labelling) by visiting all K**n labellings."""
    n, K = node_score.shape
    log_p, labellings = [], list(itertools.product(range(K), repeat=n))
    for ys in labellings:
        s = sum(node_score[v, ys[v]] for v in range(n))
        s += sum(
            edge_score(int(tree.edge_types[v]), ys[tree.parents[v]], ys[v])
            for v in range(n)
            if tree.parents[v] >= 0
        )
        log_p.append(s)
    log_p = np.array(log_p)
    p = np.exp(log_p - np.logaddexp.reduce(log_p))
    marginals = np.zeros((n, K))
    for prob, ys in zip(p, labellings, strict=True):
        marginals[np.arange(n), ys] += prob
    return marginals, labellings[int(np.argmax(log_p))]


def test_fit_predict_and_marginals_on_hand_built_trees():
    X, y, graphs = sentence_data()
    crf = crfsdca.CRF(tol=1e-8).fit(X, y, graphs=graphs)
    assert crf.graph_ == "tree" and crf.n_edge_types_ == 2
    assert crf.training_log_[-1].gap <= 1e-8
    assert crf.predict(X, graphs=graphs) == y
    assert crf.score(X, y, graphs=graphs) == 1.0
    marginals = crf.predict_marginals(X, graphs=graphs)
    for seq, labels in zip(marginals, y, strict=True):
        for p, gold in zip(seq, labels, strict=True):
            assert set(p) == set(crf.classes_)
            assert sum(p.values()) == pytest.approx(1.0, abs=1e-12)
            assert max(p, key=p.get) == gold
    parents = [g.parents.tolist() for g in graphs]  # parent arrays: every edge of type 0
    assert crf.predict_single(X[2], graph=graphs[2]) == y[2]
    assert crf.predict_marginals_single(X[2], graph=graphs[2]) == marginals[2]
    assert len(crf.predict(X, graphs=parents)) == 4
    # edge types 0 and 1 own separate transition blocks
    types = {key[2] for key in crf.transition_features_}
    assert types == {0, 1}


def test_empty_sequence_takes_an_empty_parent_array():
    X, y, graphs = sentence_data()
    crf = crfsdca.CRF(tol=1e-6).fit(X, y, graphs=graphs)
    pred = crf.predict([X[0], [], X[1]], graphs=[graphs[0], [], graphs[1]])
    assert pred == [y[0], [], y[1]]


@pytest.mark.parametrize("seed", [0, 1])
def test_crf_marginals_and_map_equal_enumeration(seed):
    X, y, graphs = random_tree_data(seed)
    crf = crfsdca.CRF(algorithm="lbfgs", c2=0.05, max_iterations=30).fit(X, y, graphs=graphs)
    state, trans = crf.state_features_, crf.transition_features_
    labels = crf.classes_
    assert crf.n_edge_types_ == 2
    marginals, pred = crf.predict_marginals(X, graphs=graphs), crf.predict(X, graphs=graphs)
    for x, tree, got, got_map in zip(X, graphs, marginals, pred, strict=True):
        assert tree.n_nodes <= 7
        node = np.array(
            [
                [sum(v * state.get((a, k), 0.0) for a, v in token_attributes(tok)) for k in labels]
                for tok in x
            ]
        )
        want, best = enumerate_labellings(
            node, lambda e, j, k: trans.get((labels[j], labels[k], e), 0.0), tree
        )
        got = np.array([[p[k] for k in labels] for p in got])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-10)
        assert got_map == [labels[k] for k in best]


def test_sequence_crf_with_bias_rows_equals_enumeration():
    """Bias rows on trees: count on every node, root on roots, leaf on nodes without children."""
    X, y, graphs = random_tree_data(2, n=5)
    corpus = AttributeCorpus(attributes=[[token_attributes(t) for t in x] for x in X], labels=y)
    encoder = make_encoder("crfsuite")
    data = TreeData(encoder.fit_transform(corpus), graphs)
    model = SequenceCRF(solver="lbfgs", n_bias_rows=3, max_epochs=20).fit(data)
    fm, w = model.feature_map_, model.weights_
    emission, bias, blocks = fm.emission(w), fm.bias(w), fm.transitions(w)
    for i, (x, tree) in enumerate(zip(X, graphs, strict=True)):
        ids = [[(encoder.vocabulary[a], v) for a, v in token_attributes(t)] for t in x]
        node = np.array([sum(v * emission[j] for j, v in item) for item in ids]) + bias[0]
        node[tree.parents < 0] += bias[1]
        node[np.diff(tree.children_start) == 0] += bias[2]
        want, best = enumerate_labellings(node, lambda e, j, k: blocks[e, j, k], tree)
        np.testing.assert_allclose(model.predict_marginals(data, i), want, rtol=0, atol=1e-10)
        start = int(data.seq_offsets[i])
        assert model.predict(data)[start : start + tree.n_nodes].tolist() == list(best)


def test_chain_given_as_trees_is_the_chain_model():
    X, y, _ = random_tree_data(3, n=8)
    chains = [chain_graph(len(x)) for x in X]
    corpus = AttributeCorpus(attributes=[[token_attributes(t) for t in x] for x in X], labels=y)
    nodes = make_encoder("crfsuite").fit_transform(corpus)
    chain = SequenceCRF(solver="sdca", tol=1e-12).fit(nodes)
    tree = SequenceCRF(solver="sdca", tol=1e-12).fit(TreeData(nodes, tuple(chains)))
    assert (chain.graph_, tree.graph_) == ("chain", "tree")
    # same objective: P(w) - P* <= gap and P is lambda-strongly convex, so
    # ||w - w*|| <= sqrt(2 gap / lambda) for each model
    lam = chain.regularization_
    bound = sum(np.sqrt(2 * max(m.result_.trace.records[-1].gap, 0.0) / lam) for m in (chain, tree))
    assert np.linalg.norm(chain.weights_ - tree.weights_) <= bound
    np.testing.assert_array_equal(
        tree.predict(TreeData(nodes, tuple(chains))), chain.predict(nodes)
    )
    # with the chain model's weights the tree model predicts exactly as the chain model
    tree.weights_ = chain.weights_
    tree_data = TreeData(nodes, tuple(chains))
    np.testing.assert_array_equal(tree.predict(tree_data), chain.predict(nodes))
    np.testing.assert_allclose(
        tree.node_marginals(tree_data), chain.node_marginals(nodes), rtol=0, atol=1e-12
    )
    # and through crfsdca.CRF
    crf_chain = crfsdca.CRF(algorithm="sdca", tol=1e-9).fit(X, y)
    crf_tree = crfsdca.CRF(algorithm="sdca", tol=1e-9).fit(X, y, graphs=chains)
    assert crf_tree.predict(X, graphs=chains) == crf_chain.predict(X)
    got = crf_tree.predict_marginals(X, graphs=chains)
    want = crf_chain.predict_marginals(X)
    for g, w in zip(itertools.chain(*got), itertools.chain(*want), strict=True):
        assert g == pytest.approx(w, abs=1e-5)


def test_save_load_round_trip_is_exact(tmp_path):
    X, y, graphs = sentence_data()
    path = str(tmp_path / "tree.npz")
    crf = crfsdca.CRF(tol=1e-6, model_filename=path).fit(X, y, graphs=graphs)
    arrays, header = load_model(path)
    assert header["graph"] == "tree" and header["n_edge_types"] == 2
    loaded = crfsdca.CRF(model_filename=path)
    assert loaded.graph_ == "tree" and loaded.n_edge_types_ == 2
    assert loaded.predict(X, graphs=graphs) == crf.predict(X, graphs=graphs)
    assert loaded.predict_marginals(X, graphs=graphs) == crf.predict_marginals(X, graphs=graphs)
    with pytest.raises(GraphError, match="this CRF was trained on trees; pass graphs="):
        loaded.predict(X)
    # SequenceCRF: weights bit for bit, header, identical predictions
    model = SequenceCRF.load(path)
    model.save(str(tmp_path / "again.npz"))
    again = SequenceCRF.load(str(tmp_path / "again.npz"))
    assert again.weights_.tobytes() == arrays["weights"].tobytes()
    assert again.feature_map_ == model.feature_map_ and again.graph_ == "tree"
    bad = dict(header, graph="dag")
    for key in ("format", "format_version", "crfsdca_version"):
        bad.pop(key)
    save_model(tmp_path / "bad.npz", arrays, bad)
    message = r"the graph kind \(graph\) must be one of chain, tree, junction; got 'dag'"
    with pytest.raises(ModelFormatError, match=message):
        SequenceCRF.load(str(tmp_path / "bad.npz"))


def test_chain_models_record_their_graph(tmp_path):
    X, y, _ = sentence_data()
    crf = crfsdca.CRF(tol=1e-4, model_filename=str(tmp_path / "c.npz")).fit(X, y)
    header = load_model(tmp_path / "c.npz")[1]
    assert header["graph"] == "chain" and header["n_edge_types"] == 1
    assert crf.graph_ == "chain" and crf.n_edge_types_ == 1
    with pytest.raises(GraphError, match="trained on linear chains; graphs= applies"):
        crf.predict(X, graphs=[chain_graph(len(x)) for x in X])


def test_bad_graphs_are_refused_with_one_clear_message():
    X, y, graphs = sentence_data()
    with pytest.raises(GraphError, match="graphs has 3 trees for 4 sequences of X"):
        crfsdca.CRF().fit(X, y, graphs=graphs[:3])
    wrong = [graphs[0], graphs[3], graphs[2], graphs[3]]
    with pytest.raises(GraphError, match=r"graphs\[1\]: the tree has 2 nodes but X\[1\] has 3"):
        crfsdca.CRF().fit(X, y, graphs=wrong)
    with pytest.raises(GraphError, match="example 1: node 2: parent 5 is out of range"):
        crfsdca.CRF().fit(X, y, graphs=[[1, 2, -1], [1, -1, 5], [1, 2, -1, 2], [1, -1]])
    with pytest.raises(GraphError, match=r"graphs\[0\]: expected a Tree or a parent array"):
        crfsdca.CRF().fit(X, y, graphs=["ab", [1, -1, 1], [1, 2, -1, 2], [1, -1]])
    with pytest.raises(ValueError, match="all_possible_states=False: tree-structured CRFs train"):
        crfsdca.CRF(algorithm="lbfgs", all_possible_states=False).fit(X, y, graphs=graphs)
    with pytest.raises(GraphError, match="needs graphs_dev for X_dev"):
        crfsdca.CRF().fit(X, y, X_dev=X, y_dev=y, graphs=graphs)
    with pytest.raises(GraphError, match="graphs_dev needs graphs"):
        crfsdca.CRF().fit(X, y, X_dev=X, y_dev=y, graphs_dev=graphs)
    crf = crfsdca.CRF(tol=1e-4).fit(X, y, graphs=graphs)
    three = Tree(np.array([1, 2, -1]), np.array([0, 2, 0]))
    with pytest.raises(GraphError, match="example 0: node 1: edge type 2, but the model has 2"):
        crf.predict([X[0]], graphs=[three])
    with pytest.raises(GraphError, match="graphs has 1 trees for 2 sequences of X"):
        crf.predict(X[:2], graphs=graphs[:1])
    with pytest.raises(ValueError, match="partial_fit continues chain models"):
        crf.partial_fit(X, y)


def test_dev_trees_are_scored_and_sklearn_clone_keeps_graphs_out_of_params():
    from sklearn.base import clone

    X, y, graphs = sentence_data()
    crf = crfsdca.CRF(tol=1e-6).fit(X, y, X_dev=X, y_dev=y, graphs=graphs, graphs_dev=graphs)
    assert crf.training_log_[-1].test_error == 0.0
    assert pickle.loads(pickle.dumps(crf)).predict(X, graphs=graphs) == y
    twin = clone(crf)
    assert "graphs" not in twin.get_params() and twin.get_params() == crf.get_params()
    assert twin.fit(X, y, graphs=graphs).predict(X, graphs=graphs) == y


def test_cross_validation_routes_graphs_to_fit_and_score():
    sklearn = pytest.importorskip("sklearn")
    from sklearn.model_selection import cross_validate

    X, y, graphs = sentence_data()
    X, y, graphs = X * 2, y * 2, graphs * 2
    with sklearn.config_context(enable_metadata_routing=True):
        crf = crfsdca.CRF(tol=1e-6).set_fit_request(graphs=True).set_score_request(graphs=True)
        scores = cross_validate(crf, X, y, params={"graphs": graphs}, cv=2)["test_score"]
    # each half holds every sentence once, with its tree: both fit and score received graphs
    assert scores.tolist() == [1.0, 1.0]


def test_sequence_crf_refuses_the_other_graph_kind():
    X, y, graphs = sentence_data()
    corpus = AttributeCorpus(attributes=[[token_attributes(t) for t in x] for x in X], labels=y)
    nodes = make_encoder("crfsuite").fit_transform(corpus)
    chain = SequenceCRF(tol=1e-4).fit(nodes)
    with pytest.raises(GraphError, match="trained on chains; got trees"):
        chain.predict(TreeData(nodes, tuple(graphs)))
    tree = SequenceCRF(tol=1e-4).fit(TreeData(nodes, tuple(graphs)))
    with pytest.raises(GraphError, match="trained on trees; got chains"):
        tree.predict(nodes)
    with pytest.raises(ValueError, match="CRFsuite's format holds linear-chain models"):
        export_crfsuite(tree, "unused.crfsuite")
