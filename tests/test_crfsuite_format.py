"""CRFsuite model export and import, checked against python-crfsuite's own tagger and reader.

The references are independent of our writer: pycrfsuite.Tagger (CRFsuite's C code) loads the
exported file and tags, and its ``info()`` dump lists the stored features; models trained by
pycrfsuite.Trainer (CRFsuite's C writer) are imported and must tag as pycrfsuite does.
"""

from __future__ import annotations

import json
import os
import struct

import numpy as np
import pytest
from click.testing import CliRunner

pycrfsuite = pytest.importorskip("pycrfsuite")

from crfsdca.cli.main import main  # noqa: E402
from crfsdca.errors import ModelFormatError  # noqa: E402
from crfsdca.estimators.crfsuite_format import (  # noqa: E402
    BIAS_ATTRIBUTES,
    attribute_names,
    crfsuite_items,
    export_crfsuite,
    import_crfsuite,
)
from crfsdca.estimators.model import SequenceCRF  # noqa: E402
from crfsdca.features.attributes import encoder_from_dict, make_encoder  # noqa: E402
from crfsdca.features.feature_map import FeatureMap  # noqa: E402
from crfsdca.io import (  # noqa: E402
    AttributeCorpus,
    TokenCorpus,
    read_conll,
    read_crfsuite,
    write_crfsuite,
)
from crfsdca.io.cqdb import build_cqdb, hashlittle, hashlittle_many, read_cqdb  # noqa: E402
from crfsdca.io.crfsuite_file import read_crfsuite_model  # noqa: E402

NAMES = ["w[0]=the", "w[0]=ünïcode", "pos[0]=NN", "a b", "x:y", "", "__BOS__", "suf=ing"]
LABELS = ("B-NP", "I-NP", "O", "é-X")


# ----------------------------------------------------------------------------- fixtures


def _random_model(seed: int, n_bias_rows: int, names: list[str] = NAMES) -> SequenceCRF:
    """A model with random weights, about a third of them exactly 0 (so not stored)."""
    rng = np.random.default_rng(seed)
    fm = FeatureMap(len(names), len(LABELS), n_bias_rows)
    w = rng.normal(size=fm.n_features)
    w[rng.random(fm.n_features) < 0.35] = 0.0
    fm.emission(w)[3] = 0.0  # an attribute with no stored feature keeps its name and id
    fm.transition(w)[1] = 0.0  # so does a label with no outgoing transition
    model = SequenceCRF(n_bias_rows=n_bias_rows)
    model.weights_, model.feature_map_, model.label_names_ = w, fm, LABELS
    model.regularization_ = 0.1
    model.encoder = {"kind": "attribute", "vocabulary": names, "label_names": list(LABELS)}
    return model


def _random_corpus(seed: int, n_sequences: int = 60, empty: bool = True) -> AttributeCorpus:
    """Items of random attributes with awkward values; some names unknown to the model.

    ``empty=False`` leaves out the empty attribute name, which pycrfsuite's dump parser
    (``Tagger.info``) cannot read; CRFsuite itself stores and tags it.
    """
    rng = np.random.default_rng(seed)
    pool = [n for n in NAMES if n or empty] + ["unseen", "w[0]=THE"]
    attributes, labels = [], []
    for _ in range(n_sequences):
        length = int(rng.integers(1, 8))
        seq = []
        for _ in range(length):
            names = rng.choice(pool, size=int(rng.integers(0, 5)), replace=False)
            seq.append([(str(n), float(rng.choice([1.0, 2.5, -1.0, 0.3]))) for n in names])
        attributes.append(seq)
        labels.append([str(rng.choice(LABELS)) for _ in range(length)])
    return AttributeCorpus(attributes=attributes, labels=labels, path="random")


def _items(corpus: AttributeCorpus, bias: bool) -> list[list[dict[str, float]]]:
    """Raw corpus items as pycrfsuite input (repeated names summed), plus the bias attributes."""
    sequences = []
    for seq in corpus.attributes:
        items = []
        for t, pairs in enumerate(seq):
            item: dict[str, float] = {}
            for name, value in pairs:
                item[name] = item.get(name, 0.0) + value
            if bias:
                item[BIAS_ATTRIBUTES[0]] = 1.0
                if t == 0:
                    item[BIAS_ATTRIBUTES[1]] = 1.0
                if t == len(seq) - 1:
                    item[BIAS_ATTRIBUTES[2]] = 1.0
            items.append(item)
        sequences.append(items)
    return sequences


def _crfsuite_tags(path, sequences) -> list[str]:
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    try:
        return [label for items in sequences for label in tagger.tag(items)]
    finally:
        tagger.close()


def _crfsdca_tags(model: SequenceCRF, corpus: AttributeCorpus) -> list[str]:
    data = encoder_from_dict(model.encoder).transform(corpus)
    return [model.label_names_[k] for k in model.predict(data)]


def _pycrfsuite_model(path, corpus: AttributeCorpus, iterations: int = 30) -> None:
    trainer = pycrfsuite.Trainer(verbose=False)
    for seq, labels in zip(corpus.attributes, corpus.labels, strict=True):
        trainer.append(_items(AttributeCorpus([seq], [labels]), bias=False)[0], labels)
    trainer.set_params({"c2": 0.1, "max_iterations": iterations})
    trainer.train(str(path))


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# ----------------------------------------------------------------------------- CQDB


def test_hashlittle_matches_lookup3_self_test():
    # the values printed by lookup3.c's driver5()
    assert hashlittle(b"") == 0xDEADBEEF
    assert hashlittle(b"", 0xDEADBEEF) == 0xBD5B7DDE
    assert hashlittle(b"Four score and seven years ago") == 0x17770551
    assert hashlittle(b"Four score and seven years ago", 1) == 0xCD628161
    assert _hashlittle_bytewise(b"Four score and seven years ago", 1) == 0xCD628161


def _hashlittle_bytewise(key: bytes, seed: int = 0) -> int:
    """lookup3's byte-at-a-time branch on Python ints: the NumPy version's twin."""
    mask = 0xFFFFFFFF

    def rot(x, k):
        return ((x << k) | (x >> (32 - k))) & mask

    a = b = c = (0xDEADBEEF + len(key) + seed) & mask
    if not key:
        return c
    rest = key
    while len(rest) > 12:
        a = (a + int.from_bytes(rest[0:4], "little")) & mask
        b = (b + int.from_bytes(rest[4:8], "little")) & mask
        c = (c + int.from_bytes(rest[8:12], "little")) & mask
        for sa, sb, sc in ((4, 6, 8), (16, 19, 4)):
            a = ((a - c) & mask) ^ rot(c, sa)
            c = (c + b) & mask
            b = ((b - a) & mask) ^ rot(a, sb)
            a = (a + c) & mask
            c = ((c - b) & mask) ^ rot(b, sc)
            b = (b + a) & mask
        rest = rest[12:]
    for i, byte in enumerate(rest):  # the switch's fall-through cases
        word = byte << (8 * (i % 4))
        if i < 4:
            a = (a + word) & mask
        elif i < 8:
            b = (b + word) & mask
        else:
            c = (c + word) & mask
    for x, y, k in (("c", "b", 14), ("a", "c", 11), ("b", "a", 25), ("c", "b", 16),
                    ("a", "c", 4), ("b", "a", 14), ("c", "b", 24)):  # fmt: skip
        v = {"a": a, "b": b, "c": c}
        v[x] = ((v[x] ^ v[y]) - rot(v[y], k)) & mask
        a, b, c = v["a"], v["b"], v["c"]
    return c


def test_hashlittle_many_equals_the_bytewise_reference():
    rng = np.random.default_rng(15)
    keys = [rng.integers(0, 256, size=n, dtype=np.uint8).tobytes() for n in range(60)] * 2
    keys += ["ünïcode\0".encode(), b"\xff" * 13, b"\0"]
    expected = [_hashlittle_bytewise(k, seed) for seed in (0, 7) for k in keys]
    got = np.concatenate([hashlittle_many(keys, seed) for seed in (0, 7)]).tolist()
    assert got == expected
    assert len(set(expected)) > 100


def test_hashlittle_matches_the_hashes_crfsuite_stores(tmp_path):
    """Every bucket of a CQDB written by CRFsuite holds hashlittle(key + NUL)."""
    path = tmp_path / "m.crfsuite"
    _pycrfsuite_model(path, _random_corpus(1))
    buffer = path.read_bytes()
    n_checked = 0
    for field in (8, 9):  # off_labels, off_attrs
        base = struct.unpack_from("<I", buffer, 4 * field)[0]
        refs = struct.unpack_from("<512I", buffer, base + 24)
        for table in range(256):
            offset, n_buckets = refs[2 * table], refs[2 * table + 1]
            for k in range(n_buckets):
                stored, record = struct.unpack_from("<II", buffer, base + offset + 8 * k)
                if record:
                    size = struct.unpack_from("<I", buffer, base + record + 4)[0]
                    key = buffer[base + record + 8 : base + record + 8 + size]
                    assert hashlittle(key) == stored and stored % 256 == table
                    n_checked += 1
    n_labels, n_attrs = struct.unpack_from("<II", buffer, 20)
    assert n_checked == n_labels + n_attrs > len(LABELS)


def test_cqdb_round_trip_of_awkward_strings():
    strings = NAMES + ["x" * 1000, "日本語", "tab\there"] + [f"s{i}" for i in range(600)]
    assert read_cqdb(build_cqdb(strings), len(strings)) == strings
    assert read_cqdb(build_cqdb([]), 0) == []


@pytest.mark.parametrize(
    ("strings", "match"), [(["a", "b", "a"], "appears twice"), (["a\0b"], "NUL")]
)
def test_cqdb_refuses_what_crfsuite_cannot_store(strings, match):
    with pytest.raises(ValueError, match=match):
        build_cqdb(strings, "attribute")


# ----------------------------------------------------------------------------- export


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_exported_model_tags_as_crfsdca(tmp_path, n_bias_rows):
    model = _random_model(0, n_bias_rows)
    path = tmp_path / "m.crfsuite"
    export_crfsuite(model, path)
    corpus = _random_corpus(2, n_sequences=300)
    expected = _crfsdca_tags(model, corpus)
    assert _crfsuite_tags(path, _items(corpus, bias=n_bias_rows > 0)) == expected
    data = encoder_from_dict(model.encoder).transform(corpus)
    assert _crfsuite_tags(path, crfsuite_items(model, data)) == expected
    assert len(set(expected)) > 2  # the check is not vacuous
    if n_bias_rows:  # the reserved attributes are needed: without them the tags differ
        assert _crfsuite_tags(path, _items(corpus, bias=False)) != expected


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_pycrfsuite_dump_lists_exactly_the_nonzero_weights(tmp_path, n_bias_rows):
    # pycrfsuite's dump parser cannot read an empty attribute name (CRFsuite itself can)
    names = [n or "empty" for n in NAMES]
    model = _random_model(3, n_bias_rows, names)
    path = tmp_path / "m.crfsuite"
    export_crfsuite(model, str(path))
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    info = tagger.info()
    fm, w = model.feature_map_, model.weights_
    names = names + list(BIAS_ATTRIBUTES[: n_bias_rows and 3])
    state = np.vstack([fm.emission(w), fm.bias(w)])
    expected_state = {
        (names[a], LABELS[k]): state[a, k] for a, k in zip(*np.nonzero(state), strict=True)
    }
    trans = fm.transition(w)
    expected_trans = {
        (LABELS[i], LABELS[j]): trans[i, j] for i, j in zip(*np.nonzero(trans), strict=True)
    }
    assert set(info.state_features) == set(expected_state)
    assert set(info.transitions) == set(expected_trans)
    # the dump prints weights with %f: six decimals, rounded
    for key, value in expected_state.items():
        assert abs(info.state_features[key] - value) <= 5e-7 + 1e-12
    for key, value in expected_trans.items():
        assert abs(info.transitions[key] - value) <= 5e-7 + 1e-12
    assert [int(info.attributes[n]) for n in names] == list(range(len(names)))
    assert [int(info.labels[n]) for n in LABELS] == list(range(len(LABELS)))


@pytest.mark.parametrize("n_bias_rows", [0, 3])
def test_round_trip_keeps_weights_labels_and_attributes(tmp_path, n_bias_rows):
    model = _random_model(4, n_bias_rows)
    path = tmp_path / "m.crfsuite"
    export_crfsuite(model, path)
    back = import_crfsuite(path)
    assert back.feature_map_ == model.feature_map_
    assert np.array_equal(back.weights_, model.weights_)
    assert back.label_names_ == LABELS
    assert back.encoder["vocabulary"] == NAMES
    # and through the .npz model file
    back.save(str(tmp_path / "m.npz"))
    again = SequenceCRF.load(str(tmp_path / "m.npz"))
    assert np.array_equal(again.weights_, model.weights_)
    corpus = _random_corpus(5)
    assert _crfsdca_tags(again, corpus) == _crfsdca_tags(model, corpus)


def test_template_model_attribute_names_are_the_template_names():
    encoder = make_encoder("crfsuite-chunking")
    tokens = [[("The", "DT"), ("cat", "NN")], [("sat", "VBD")]]
    corpus = TokenCorpus(
        tokens=tokens, labels=[["B-NP", "I-NP"], ["B-VP"]], field_names=("w", "pos")
    )
    data = encoder.fit_transform(corpus)
    model = SequenceCRF(n_bias_rows=0)
    fm = FeatureMap(data.n_attributes, data.n_labels, 0)
    model.weights_, model.feature_map_, model.label_names_ = fm.zeros(), fm, data.label_names
    model.encoder = encoder.to_dict()
    names = attribute_names(model)
    assert names == encoder.attribute_names()
    assert "w[-1]|w[0]=The|cat" in names and "pos[0]=VBD" in names and names[-1] == "__EOS__"


def test_export_refuses_a_reserved_attribute_name(tmp_path):
    model = _random_model(0, 3)
    model.encoder = {**model.encoder, "vocabulary": [*NAMES[:-1], BIAS_ATTRIBUTES[1]]}
    with pytest.raises(ValueError, match="reserved for the bias rows"):
        export_crfsuite(model, tmp_path / "m.crfsuite")
    assert not (tmp_path / "m.crfsuite").exists()


# ----------------------------------------------------------------------------- import


def test_imported_pycrfsuite_model_tags_as_pycrfsuite(tmp_path):
    path = tmp_path / "m.crfsuite"
    train = _random_corpus(6, n_sequences=200, empty=False)
    _pycrfsuite_model(path, train)
    model = import_crfsuite(path)
    assert model.feature_map_.n_bias_rows == 0
    test = _random_corpus(7, n_sequences=300)
    expected = _crfsuite_tags(path, _items(test, bias=False))
    assert _crfsdca_tags(model, test) == expected
    assert len(set(expected)) > 2
    tagger = pycrfsuite.Tagger()
    tagger.open(str(path))
    info = tagger.info()
    cm = read_crfsuite_model(path)
    for (a, k), value in info.state_features.items():
        assert abs(cm.state[cm.attributes.index(a), cm.labels.index(k)] - value) <= 5e-7 + 1e-12
    assert np.count_nonzero(cm.state) == len(info.state_features)


def test_reexported_pycrfsuite_model_gives_the_same_dump(tmp_path):
    path = tmp_path / "m.crfsuite"
    _pycrfsuite_model(path, _random_corpus(8, n_sequences=100, empty=False))
    export_crfsuite(import_crfsuite(path), tmp_path / "again.crfsuite")
    infos = []
    for p in (path, tmp_path / "again.crfsuite"):
        tagger = pycrfsuite.Tagger()
        tagger.open(str(p))
        infos.append(tagger.info())
    assert infos[0].state_features == infos[1].state_features
    assert infos[0].transitions == infos[1].transitions
    assert infos[0].labels == infos[1].labels


def _exported_bytes(tmp_path) -> bytes:
    path = tmp_path / "good.crfsuite"
    export_crfsuite(_random_model(0, 3), path)
    return path.read_bytes()


@pytest.mark.parametrize("cut", [0, 3, 20, 47, 48, 100, 3000, -300, -40, -1])
def test_truncated_file_is_refused_in_one_line(tmp_path, cut):
    good = _exported_bytes(tmp_path)
    bad = tmp_path / "bad.crfsuite"
    bad.write_bytes(good[:cut])
    with pytest.raises(ModelFormatError, match="bad.crfsuite: (not a CRFsuite|truncated)"):
        read_crfsuite_model(bad)
    result = run("import-crfsuite", bad, tmp_path / "out.npz")
    assert result.exit_code == 1
    assert result.stderr.startswith("crfsdca: error: ") and "bad.crfsuite" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "out.npz").exists()


def _patched(good: bytes, offset: int, value: bytes) -> bytes:
    return good[:offset] + value + good[offset + len(value) :]


@pytest.mark.parametrize(
    ("offset", "value", "match"),
    [
        (0, b"LCRF", "expected magic b'lCRF'"),
        (8, b"FOMD", "unsupported CRFsuite model type"),
        (12, struct.pack("<I", 101), "version 101"),
        (20, struct.pack("<I", 10**6), "backward array|outside"),
        (24, struct.pack("<I", 10**6), "backward array|outside"),
        (28, struct.pack("<I", 7), "FEAT chunk"),
        (32, struct.pack("<I", 2**31), "labels chunk offset"),
        (40, struct.pack("<I", 60), "LFRF chunk"),
        (44, struct.pack("<I", 2**30), "AFRF chunk offset"),
        (48 + 8, struct.pack("<I", 10**8), "FEAT chunk holds"),
        (48 + 12, struct.pack("<I", 7), "state feature list|transition feature list"),
    ],
)
def test_corrupted_file_is_refused(tmp_path, offset, value, match):
    bad = tmp_path / "bad.crfsuite"
    bad.write_bytes(_patched(_exported_bytes(tmp_path), offset, value))
    with pytest.raises(ModelFormatError, match=match):
        read_crfsuite_model(bad)


def test_random_corruption_gives_a_model_or_a_model_format_error(tmp_path):
    """Seeded byte flips anywhere in the file: parsed, or refused with ModelFormatError."""
    good = _exported_bytes(tmp_path)
    rng = np.random.default_rng(13)
    bad = tmp_path / "bad.crfsuite"
    outcomes = {"parsed": 0, "refused": 0}
    for _ in range(400):
        data = bytearray(good)
        for position in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            data[position] = int(rng.integers(0, 256))
        bad.write_bytes(bytes(data))
        try:
            read_crfsuite_model(bad)
            outcomes["parsed"] += 1
        except ModelFormatError:
            outcomes["refused"] += 1
    assert outcomes["refused"] > 0 and outcomes["parsed"] > 0


def test_model_without_attributes_and_without_encoder(tmp_path):
    model = SequenceCRF(n_bias_rows=3)
    fm = FeatureMap(0, 2, 3)
    w = np.random.default_rng(14).normal(size=fm.n_features)
    model.weights_, model.feature_map_, model.label_names_ = w, fm, ("a", "b")
    export_crfsuite(model, tmp_path / "m.crfsuite")
    back = import_crfsuite(tmp_path / "m.crfsuite")
    assert back.feature_map_ == fm and np.array_equal(back.weights_, w)
    corpus = AttributeCorpus(attributes=[[[]] * 5, [[]]], labels=[["a"] * 5, ["b"]])
    assert _crfsuite_tags(tmp_path / "m.crfsuite", _items(corpus, True)) == _crfsdca_tags(
        back, corpus
    )
    # without an encoder, attributes are named by their ids
    model.feature_map_ = FeatureMap(3, 2, 0)
    model.weights_ = np.arange(model.feature_map_.n_features, dtype=float)
    assert attribute_names(model) == ["0", "1", "2"]


# ----------------------------------------------------------------------------- CLI


def test_cli_export_then_import(tmp_path):
    model = _random_model(9, 3)
    model.save(str(tmp_path / "m.npz"))
    result = run("export", tmp_path / "m.npz", tmp_path / "m.crfsuite")
    assert result.exit_code == 0, result.output
    assert "__crfsdca_bias__" in result.stderr
    corpus = _random_corpus(10)
    assert _crfsuite_tags(tmp_path / "m.crfsuite", _items(corpus, True)) == _crfsdca_tags(
        model, corpus
    )
    result = run("import-crfsuite", tmp_path / "m.crfsuite", tmp_path / "back.npz")
    assert result.exit_code == 0, result.output
    assert "4 labels, 8 attributes, 3 bias rows" in result.stdout
    back = SequenceCRF.load(str(tmp_path / "back.npz"))
    assert np.array_equal(back.weights_, model.weights_)


@pytest.mark.filterwarnings("ignore::crfsdca.errors.ConvergenceWarning")
def test_cli_train_export_tag(tmp_path):
    """A template model trained by the CLI, exported, tags its training file as crfsdca does."""
    sentences = [
        [("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), (".", ".", "O")],
        [("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("ran", "VBD", "B-VP")],
        [("Dogs", "NNS", "B-NP"), ("bark", "VBP", "B-VP"), (".", ".", "O")],
    ]
    text = "\n\n".join("\n".join(" ".join(tok) for tok in s) for s in sentences * 4) + "\n"
    (tmp_path / "train.txt").write_text(text)
    args = ["--format", "conll", "--template", "crfsuite-chunking", "--bias", "--epochs", "5"]
    result = run("train", tmp_path / "train.txt", *args, "-q", "--model", tmp_path / "m.npz")
    assert result.exit_code == 0, result.output
    assert run("export", tmp_path / "m.npz", tmp_path / "m.crfsuite").exit_code == 0
    model = SequenceCRF.load(str(tmp_path / "m.npz"))
    encoder = encoder_from_dict(model.encoder)
    data = encoder.transform(read_conll(tmp_path / "train.txt"))
    expected = [model.label_names_[k] for k in model.predict(data)]
    assert _crfsuite_tags(tmp_path / "m.crfsuite", crfsuite_items(model, data)) == expected
    assert "w[-1]|w[0]=The|cat" in read_crfsuite_model(tmp_path / "m.crfsuite").attributes


def test_cli_export_of_a_non_model_fails_in_one_line(tmp_path):
    (tmp_path / "m.npz").write_bytes(b"lCRF not a crfsdca model")
    result = run("export", tmp_path / "m.npz", tmp_path / "m.crfsuite")
    assert result.exit_code == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "m.npz" in result.stderr
    assert not (tmp_path / "m.crfsuite").exists()


# ----------------------------------------------------------------------------- real data

N_TRAIN = 1500
SDCA_EPOCHS = 4


def _conll2000(split: str):
    data_loaders = pytest.importorskip("data_loaders")
    if not os.environ.get("CRFSDCA_DATA_DIR"):
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    try:
        return data_loaders.load_dataset("conll2000", split)
    except data_loaders.DatasetNotFoundError as err:
        pytest.skip(str(err))


def _attribute_corpus(tokens) -> AttributeCorpus:
    """The crfsuite-chunking attributes of every token (fitted on ``tokens`` itself, so test
    items keep the attributes training never saw: CRFsuite and the encoder must drop them)."""
    encoder = make_encoder("crfsuite-chunking")
    data = encoder.fit_transform(tokens)
    names = encoder.attribute_names()
    attributes = []
    for i in range(data.n_sequences):
        seq = []
        for t in range(data.seq_offsets[i], data.seq_offsets[i + 1]):
            span = slice(data.attr_offsets[t], data.attr_offsets[t + 1])
            seq.append([(names[a], 1.0) for a in data.attr_ids[span].tolist()])
        attributes.append(seq)
    return AttributeCorpus(attributes=attributes, labels=[list(s) for s in tokens.labels])


def _fit(train, n_bias_rows, encoder):
    model = SequenceCRF(
        solver="sdca", n_bias_rows=n_bias_rows, max_epochs=SDCA_EPOCHS, eval_every=100
    )
    return model.fit(train, encoder=encoder.to_dict())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::crfsdca.errors.ConvergenceWarning")
def test_conll2000_template_model_tags_identically_in_crfsuite(tmp_path):
    encoder = make_encoder("conll")  # per-template padding, lowercased words, bias rows
    train = encoder.fit_transform(_conll2000("train").head(N_TRAIN))
    model = _fit(train, 3, encoder)
    test = encoder.transform(_conll2000("test"))
    path = tmp_path / "conll.crfsuite"
    export_crfsuite(model, path)
    expected = [model.label_names_[k] for k in model.predict(test)]
    got = _crfsuite_tags(path, crfsuite_items(model, test))
    assert len(got) == test.n_items == 47377 and len(set(expected)) > 10
    assert got == expected
    back = import_crfsuite(path)
    assert np.array_equal(back.weights_, model.weights_)
    assert back.encoder["vocabulary"] == encoder.attribute_names()
    # half of the weights set to 0, so left out of the file: still the same labels
    w = model.weights_
    model.weights_ = np.where(np.abs(w) < np.median(np.abs(w)), 0.0, w)
    export_crfsuite(model, path)
    expected = [model.label_names_[k] for k in model.predict(test)]
    assert _crfsuite_tags(path, crfsuite_items(model, test)) == expected
    assert np.array_equal(import_crfsuite(path).weights_, model.weights_)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::crfsdca.errors.ConvergenceWarning")
def test_conll2000_attribute_file_model_tags_identically_in_crfsuite(tmp_path):
    write_crfsuite(tmp_path / "train.txt", _attribute_corpus(_conll2000("train").head(N_TRAIN)))
    write_crfsuite(tmp_path / "test.txt", _attribute_corpus(_conll2000("test")))
    train_corpus, test_corpus = (read_crfsuite(tmp_path / f) for f in ("train.txt", "test.txt"))
    encoder = make_encoder("crfsuite")
    model = _fit(encoder.fit_transform(train_corpus), 0, encoder)
    path = tmp_path / "attr.crfsuite"
    export_crfsuite(model, path)
    expected = _crfsdca_tags(model, test_corpus)
    got = _crfsuite_tags(path, _items(test_corpus, bias=False))
    assert len(got) == 47377 and len(set(expected)) > 10 and got == expected
    # a model trained by CRFsuite itself, imported, tags as CRFsuite does
    trained = tmp_path / "pycrfsuite.crfsuite"
    _pycrfsuite_model(trained, train_corpus, iterations=20)
    imported = import_crfsuite(trained)
    expected = _crfsuite_tags(trained, _items(test_corpus, bias=False))
    assert len(set(expected)) > 10 and _crfsdca_tags(imported, test_corpus) == expected


def test_imported_model_evaluates_crfsuite_attribute_files(tmp_path):
    trained = tmp_path / "m.crfsuite"
    _pycrfsuite_model(trained, _random_corpus(11, n_sequences=200))
    assert run("import-crfsuite", trained, tmp_path / "m.npz").exit_code == 0
    test = _random_corpus(12, n_sequences=100)
    test.attributes = [[[p for p in item if p[0]] for item in seq] for seq in test.attributes]
    write_crfsuite(tmp_path / "test.txt", test)
    result = run("evaluate", tmp_path / "m.npz", tmp_path / "test.txt", "--json")
    assert result.exit_code == 0, result.output
    tags = _crfsuite_tags(trained, _items(read_crfsuite(tmp_path / "test.txt"), bias=False))
    gold = [label for seq in test.labels for label in seq]
    accuracy = np.mean([a == b for a, b in zip(tags, gold, strict=True)])
    assert json.loads(result.stdout)["token_accuracy"] == pytest.approx(accuracy, abs=1e-12)
