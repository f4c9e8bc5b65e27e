"""Attribute templates and encoders (crfsdca.features.attributes)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from crfsdca.errors import NotFittedError
from crfsdca.features.attributes import (
    TEMPLATE_SETS,
    AttributeEncoder,
    DenseEncoder,
    Template,
    TemplateEncoder,
    TemplateSet,
    encoder_from_dict,
    make_encoder,
    suffix3,
    word_shape,
)
from crfsdca.io import AttributeCorpus, DenseCorpus, TokenCorpus, read_conll, read_conllu

DATA_DIR = os.environ.get("CRFSDCA_DATA_DIR")
needs_data = pytest.mark.skipif(
    not DATA_DIR or not Path(DATA_DIR).is_dir(), reason="CRFSDCA_DATA_DIR not set or missing"
)


def _corpus(sentences: list[list[tuple[str, str, str]]], path: str = "toy") -> TokenCorpus:
    return TokenCorpus(
        tokens=[[t[:2] for t in s] for s in sentences],
        labels=[[t[2] for t in s] for s in sentences],
        field_names=("w", "pos"),
        path=path,
    )


TOY = _corpus(
    [
        [("A", "DT", "B-NP"), ("Cat", "NN", "I-NP"), ("sat", "VBD", "B-VP")],
        [("Dogs", "NNS", "B-NP")],
        [("a", "DT", "B-NP"), ("cat", "NN", "I-NP")],
    ]
)


def _names(encoder, data, t: int) -> list[str]:
    names = _attribute_names(encoder)
    ids = data.attr_ids[data.attr_offsets[t] : data.attr_offsets[t + 1]]
    return [names[i] for i in ids]


_NAMES_CACHE: dict[int, tuple[object, list[str]]] = {}


def _attribute_names(encoder) -> list[str]:
    """encoder.attribute_names(), computed once per encoder object."""
    cached = _NAMES_CACHE.get(id(encoder))
    if cached is None or cached[0] is not encoder:
        cached = _NAMES_CACHE[id(encoder)] = (encoder, encoder.attribute_names())
    return cached[1]


def _set(name, templates, **kwargs) -> TemplateSet:
    return TemplateSet(name, ("w", "pos"), tuple(Template.of(*t) for t in templates), **kwargs)


# ----------------------------------------------------------------------------- derived fields


@pytest.mark.parametrize(
    ("word", "shape"),
    [("De", "Xx"), ("ETA", "XXX"), ("CV70", "XXxx"), ("2000", "xxxx"), ("Één", "xxx"), ("", "")],
)
def test_word_shape(word, shape):
    assert word_shape(word) == shape


def test_suffix3():
    assert suffix3("walking") == "ing" and suffix3("Dogs") == "ogs"
    assert suffix3("cat") == suffix3("a") == "__SHORT__"


def test_template_names_follow_crfsuite():
    assert Template.of(("w", -1), ("w", 0)).name == "w[-1]|w[0]"
    assert [t.name for t in TEMPLATE_SETS["conll"].templates][:7] == [
        "w[-2]", "w[-1]", "w[0]", "w[1]", "w[2]", "w[-1]|w[0]", "w[0]|w[1]",
    ]  # fmt: skip
    assert [len(TEMPLATE_SETS[k].templates) for k in ("conll", "ner", "pos")] == [19, 20, 13]


# ----------------------------------------------------------------------------- padding


def test_per_template_padding_and_lowercase():
    ts = _set("t", [[("w", -1)], [("w", 0)], [("w", 1)]], lowercase_fields=("w",),
              padding="per-template")  # fmt: skip
    enc = TemplateEncoder(ts)
    data = enc.fit_transform(TOY)
    assert _names(enc, data, 0) == ["w[-1]=__PAD__", "w[0]=a", "w[1]=cat"]
    assert _names(enc, data, 3) == ["w[-1]=__PAD__", "w[0]=dogs", "w[1]=__PAD__"]
    # lowercasing merges "A"/"a" and "Cat"/"cat": first appearance gives the ids
    assert list(enc.vocabularies[1]) == ["a", "cat", "sat", "dogs"]
    assert data.meta["template"] == "t" and data.n_attributes == enc.n_attributes == 3 + 4 + 3


def test_positional_padding_distinguishes_distance():
    ts = _set("t", [[("w", -2)], [("pos", 1), ("pos", 2)]], padding="positional")
    enc = TemplateEncoder(ts)
    data = enc.fit_transform(TOY)
    assert _names(enc, data, 0) == ["w[-2]=__BOS2__", "pos[1]|pos[2]=NN|VBD"]
    assert _names(enc, data, 1) == ["w[-2]=__BOS1__", "pos[1]|pos[2]=VBD|__EOS1__"]
    assert _names(enc, data, 2) == ["w[-2]=A", "pos[1]|pos[2]=__EOS1__|__EOS2__"]


def test_no_padding_drops_attributes_and_adds_bos_eos():
    ts = _set("t", [[("w", -1), ("w", 0)], [("pos", 0)]], padding="none", bos_eos=True)
    enc = TemplateEncoder(ts)
    data = enc.fit_transform(TOY)
    assert _names(enc, data, 0) == ["pos[0]=DT", "__BOS__"]
    assert _names(enc, data, 2) == ["w[-1]|w[0]=Cat|sat", "pos[0]=VBD", "__EOS__"]
    assert _names(enc, data, 3) == ["pos[0]=NNS", "__BOS__", "__EOS__"]
    assert "w[-1]|w[0]=__PAD__|A" not in enc.attribute_names()
    # ids of a token come out sorted; every id is used
    for t in range(data.n_items):
        ids = data.attr_ids[data.attr_offsets[t] : data.attr_offsets[t + 1]]
        assert np.all(np.diff(ids) > 0)
    assert set(data.attr_ids.tolist()) == set(range(enc.n_attributes))


def test_min_count_prunes_per_template_in_first_appearance_order():
    ts = _set("t", [[("pos", 0)], [("w", 0)]], min_count=2, lowercase_fields=("w",))
    enc = TemplateEncoder(ts)
    data = enc.fit_transform(TOY)
    assert list(enc.vocabularies[0]) == ["DT", "NN"] and enc.counts[0] == [2, 2]
    assert list(enc.vocabularies[1]) == ["a", "cat"]
    np.testing.assert_array_equal(
        enc.template_ids(TOY), [[1, 1], [2, 2], [0, 0], [0, 0], [1, 1], [2, 2]]
    )
    assert np.diff(data.attr_offsets).tolist() == [2, 2, 0, 0, 2, 2]


def test_unseen_values_and_labels():
    enc = make_encoder("conll").fit(TOY)
    test = _corpus([[("Zebra", "XX", "I-LST"), ("cat", "NN", "I-NP")]])
    data = enc.transform(test)
    assert data.labels.tolist() == [-1, enc.label_names.index("I-NP")]
    assert data.meta["n_unknown_labels"] == 1
    assert enc.label_names == ("B-NP", "I-NP", "B-VP")
    ids = enc.template_ids(test)
    assert ids[0, 2] == 0  # w[0]=zebra unseen
    assert ids[1, 2] == 0  # min_count 3 prunes everything seen twice or less


def test_fit_transform_equals_fit_then_transform():
    for name in ("conll", "ner", "pos", "crfsuite-chunking"):
        a = make_encoder(name).fit_transform(TOY)
        b = make_encoder(name).fit(TOY).transform(TOY)
        for x, y in zip(a.arrays(), b.arrays(), strict=True):
            np.testing.assert_array_equal(x, y)


def test_json_round_trip():
    enc = TemplateEncoder(
        _set("t", [[("w", 0)], [("shape", -1), ("w", 0)]], padding="positional",
             derived_fields=(("shape", "shape", "w"),))
    )  # fmt: skip
    data = enc.fit_transform(TOY)
    again = encoder_from_dict(json.loads(json.dumps(enc.to_dict())))
    assert again.template_set == enc.template_set
    assert again.attribute_names() == enc.attribute_names()
    for x, y in zip(data.arrays(), again.transform(TOY).arrays(), strict=True):
        np.testing.assert_array_equal(x, y)


def test_template_set_from_user_dict():
    ts = TemplateSet.from_dict(
        {
            "name": "mine",
            "field_names": ["w", "pos"],
            "templates": [[["w", 0]], [["w", -1], ["w", 0]], ["custom", [["pos", 0]]]],
            "derived_fields": [["suf", "suf3", "w"]],
            "padding": "positional",
            "min_count": 1,
        }
    )
    assert [t.name for t in ts.templates] == ["w[0]", "w[-1]|w[0]", "custom"]
    assert TemplateSet.from_dict(ts.to_dict()) == ts
    assert TemplateEncoder(ts).fit(TOY).n_attributes == 6 + 6 + 4


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"templates": (Template.of(("lemma", 0)),)}, r"unknown fields \['lemma'\]"),
        ({"padding": "zeros"}, "padding must be"),
        ({"min_count": 0}, "min_count must be >= 1"),
        ({"default_bias_rows": 2}, "default_bias_rows must be 0 or 3"),
        ({"derived_fields": (("s", "nope", "w"),)}, "derived field"),
        ({"templates": ()}, "non-empty unique"),
    ],
)
def test_template_set_validation(kwargs, pattern):
    base = {"name": "x", "field_names": ("w",), "templates": (Template.of(("w", 0)),)}
    with pytest.raises(ValueError, match=pattern):
        TemplateSet(**{**base, **kwargs})


def test_encoder_errors():
    with pytest.raises(ValueError, match="unknown encoder 'nope'"):
        make_encoder("nope")
    with pytest.raises(ValueError, match="unknown template set"):
        TemplateEncoder("nope")
    with pytest.raises(NotFittedError, match="call fit"):
        make_encoder("conll").transform(TOY)
    one_field = TokenCorpus([[("a",)]], [["O"]], ("w",), "one.txt")
    with pytest.raises(ValueError, match=r"one\.txt: template set 'conll' expects token fields"):
        make_encoder("conll").fit(one_field)
    with pytest.raises(TypeError, match="needs a TokenCorpus"):
        make_encoder("conll").fit(AttributeCorpus([[[("a", 1.0)]]], [["O"]]))
    with pytest.raises(ValueError, match="expected kind"):
        encoder_from_dict({"kind": "other"})


def test_items_and_labels_must_agree():
    bad = TokenCorpus([[("a", "DT"), ("b", "NN")]], [["O"]], ("w", "pos"), "bad.txt")
    with pytest.raises(ValueError, match=r"bad\.txt: sequence 0: 2 items but 1 labels"):
        make_encoder("conll").fit_transform(bad)


def test_empty_corpus_encodes_to_empty_data():
    for name in ("conll", "ner", "pos", "crfsuite-chunking"):
        data = make_encoder(name).fit(TOY).transform(TOY.head(0))
        assert (data.n_sequences, data.n_items, data.attr_ids.size) == (0, 0, 0)


def test_default_bias_rows():
    assert make_encoder("conll").default_bias_rows == 3
    assert make_encoder("ocr").default_bias_rows == 3
    assert make_encoder("crfsuite").default_bias_rows == 0
    assert make_encoder("crfsuite-chunking").default_bias_rows == 0


# ----------------------------------------------------------------------------- other encoders


def test_attribute_encoder():
    train = AttributeCorpus(
        attributes=[[[("a", 1.0), ("b", 0.5), ("a", 2.0)], []], [[("c", -1.0), ("b", 0.0)]]],
        labels=[["X", "Y"], ["X"]],
        path="train.txt",
    )
    enc = AttributeEncoder()
    data = enc.fit_transform(train)
    assert (enc.n_attributes, enc.label_names) == (3, ("X", "Y"))
    assert data.attr_offsets.tolist() == [0, 2, 2, 3]
    assert data.attr_ids.tolist() == [0, 1, 2] and data.attr_values.tolist() == [3.0, 0.5, -1.0]
    test = AttributeCorpus([[[("z", 1.0), ("c", 2.0)]]], [["Q"]])
    encoded = encoder_from_dict(json.loads(json.dumps(enc.to_dict()))).transform(test)
    assert encoded.attr_ids.tolist() == [2] and encoded.labels.tolist() == [-1]


def test_dense_encoder_stores_non_zeros():
    values = np.array([[0, 2.5, 0], [1, 0, 0], [0, 0, 0]])
    corpus = DenseCorpus(values, np.array([0, 2, 3]), [["a", "b"], ["a"]], np.array([0, 1]))
    enc = DenseEncoder(3)
    data = enc.fit_transform(corpus)
    assert data.attr_offsets.tolist() == [0, 1, 2, 2]
    assert data.attr_ids.tolist() == [1, 0] and data.attr_values.tolist() == [2.5, 1.0]
    assert data.n_attributes == 3 and data.seq_offsets.tolist() == [0, 2, 3]
    with pytest.raises(ValueError, match="expected 4 columns, got 3"):
        DenseEncoder(4).fit(corpus)
    ocr = make_encoder("ocr")
    assert ocr.fit(DenseCorpus(np.zeros((1, 128)), np.array([0, 1]), [["q"]], np.zeros(1))) is ocr
    # the OCR label set is the alphabet, whatever letters the fitted data holds
    assert ocr.label_names == tuple("abcdefghijklmnopqrstuvwxyz") and ocr.n_attributes == 128


# ----------------------------------------------------------------------------- CRFsuite reference

# chunking.py's templates, written out as in the CRFsuite example
CHUNKING_TEMPLATES = [
    (("w", -2),), (("w", -1),), (("w", 0),), (("w", 1),), (("w", 2),),
    (("w", -1), ("w", 0)), (("w", 0), ("w", 1)),
    (("pos", -2),), (("pos", -1),), (("pos", 0),), (("pos", 1),), (("pos", 2),),
    (("pos", -2), ("pos", -1)), (("pos", -1), ("pos", 0)), (("pos", 0), ("pos", 1)),
    (("pos", 1), ("pos", 2)),
    (("pos", -2), ("pos", -1), ("pos", 0)), (("pos", -1), ("pos", 0), ("pos", 1)),
    (("pos", 0), ("pos", 1), ("pos", 2)),
]  # fmt: skip


def crfutils_attributes(sentence: list[tuple[str, ...]]) -> list[list[str]]:
    """What crfutils.apply_templates plus chunking.py's BOS/EOS produce for one sentence."""
    index = {"w": 0, "pos": 1}
    out: list[list[str]] = []
    for t in range(len(sentence)):
        names = []
        for template in CHUNKING_TEMPLATES:
            if all(0 <= t + o < len(sentence) for _, o in template):
                name = "|".join(f"{f}[{o}]" for f, o in template)
                value = "|".join(sentence[t + o][index[f]] for f, o in template)
                names.append(f"{name}={value}")
        out.append(names)
    out[0].append("__BOS__")
    out[-1].append("__EOS__")
    return out


def test_crfsuite_chunking_matches_crfutils_on_toy():
    enc = make_encoder("crfsuite-chunking")
    data = enc.fit_transform(TOY)
    t = 0
    for sentence in TOY.tokens:
        for names in crfutils_attributes(sentence):
            assert sorted(_names(enc, data, t)) == sorted(names)
            t += 1


# ----------------------------------------------------------------------------- real corpora


@pytest.fixture(scope="module")
def conll_train():
    return read_conll(Path(DATA_DIR) / "conll2000/train.txt.gz", field_names=("w", "pos"))


@pytest.mark.slow
@needs_data
def test_conll_attribute_count(conll_train):
    enc = make_encoder("conll")
    data = enc.fit_transform(conll_train)
    # A, the per-template sizes and the active counts of the "conll" set
    # (crfsdca/features/templates.py,
    # CRFsuite's chunking.py templates; A = 74,658 is Table 1 of Le Priol et al.; the rest follow
    # SAG4CRF's coNLL_test.mat, checked below)
    assert enc.n_attributes == 74658
    sizes = [6046, 6324, 6325, 6163, 5986, 12432, 12055, 45, 45, 44, 44, 44]
    sizes += [901, 911, 888, 878, 5241, 5246, 5040]
    assert [len(v) for v in enc.vocabularies] == sizes
    assert (data.n_sequences, data.n_items, data.n_labels) == (8936, 211727, 22)
    n_active = np.diff(data.attr_offsets)
    assert (n_active.min(), n_active.max(), round(n_active.mean(), 1)) == (9, 19, 17.6)


@pytest.mark.slow
@needs_data
def test_conll_reproduces_sag4crf_test_file(conll_train):
    """Our ids on the CoNLL-2000 test set equal coNLL_test.mat column for column."""
    scipy_io = pytest.importorskip("scipy.io")
    enc = make_encoder("conll").fit(conll_train)
    test = read_conll(Path(DATA_DIR) / "conll2000/test.txt.gz", field_names=("w", "pos"))
    with gzip.open(Path(DATA_DIR) / "sag4crf_mat/coNLL_test.mat.gz") as f:
        mat = scipy_io.loadmat(f)
    y = mat["y"].ravel().astype(np.int64)
    rows = y != 0
    np.testing.assert_array_equal(enc.template_ids(test), mat["X"][rows].astype(np.int64))
    labels = enc.transform(test).labels
    known = labels >= 0
    np.testing.assert_array_equal(labels[known] + 1, y[rows][known])
    assert (~known).sum() == 2 and set(y[rows][~known]) == {23}  # I-LST, unseen in training
    assert np.flatnonzero(~rows).size == 2012


@pytest.mark.slow
@needs_data
def test_crfsuite_chunking_attribute_count(conll_train):
    enc = make_encoder("crfsuite-chunking")
    data = enc.fit_transform(conll_train)
    assert enc.n_attributes == 335674
    assert len(set(enc.attribute_names())) == 335674
    assert data.meta["default_bias_rows"] == 0
    head = conll_train.head(300)
    enc_head = make_encoder("crfsuite-chunking")
    data_head = enc_head.fit_transform(head)
    t = 0
    for sentence in head.tokens:
        for names in crfutils_attributes(sentence):
            assert sorted(_names(enc_head, data_head, t)) == sorted(names)
            t += 1


@pytest.mark.slow
@needs_data
def test_crfsuite_counts_the_same_attributes(conll_train, tmp_path):
    """python-crfsuite counts the attributes of the whole training file: the independent
    source of the 335,674 pinned above."""
    pycrfsuite = pytest.importorskip("pycrfsuite")
    head = conll_train
    enc = make_encoder("crfsuite-chunking")
    data = enc.fit_transform(head)
    log: list[str] = []

    class Trainer(pycrfsuite.Trainer):
        def message(self, message):
            log.append(message)

    trainer = Trainer(verbose=False)
    for i, sentence in enumerate(head.tokens):
        trainer.append(crfutils_attributes(sentence), head.labels[i])
    trainer.set_params({"max_iterations": 1})
    trainer.train(str(tmp_path / "model.crfsuite"))
    found = re.search(r"Number of active attributes: (\d+)", "".join(log))
    assert found and int(found.group(1)) == enc.n_attributes == data.n_attributes == 335674


@pytest.fixture(scope="module")
def ner_encoder():
    train = read_conll(Path(DATA_DIR) / "conll2002_ned/ned.train.gz", docstart="keep")
    enc = make_encoder("ner")
    return enc, enc.fit_transform(train)


@pytest.mark.slow
@needs_data
def test_ner_attribute_count(ner_encoder):
    enc, data = ner_encoder
    # the "ner" set of crfsdca/features/templates.py (3.1e5 in Table 1 of Le Priol et al.)
    assert enc.n_attributes == 310983
    assert [len(v) for v in enc.vocabularies][:5] == [27804, 27416, 26159, 112934, 111032]
    assert np.all(np.diff(data.attr_offsets) == 20)  # every training token has 20 attributes
    assert data.n_labels == 9


@pytest.mark.slow
@needs_data
def test_ner_matches_sag4crf_test_file_up_to_renumbering(ner_encoder):
    scipy_io = pytest.importorskip("scipy.io")
    enc, _ = ner_encoder
    test = read_conll(Path(DATA_DIR) / "conll2002_ned/ned.testb.gz", docstart="keep")
    ours = enc.template_ids(test)
    with gzip.open(Path(DATA_DIR) / "sag4crf_mat/NER_test.mat.gz") as f:
        mat = scipy_io.loadmat(f)
    theirs = mat["X"][mat["y"].ravel() != 0].astype(np.int64)
    assert ours.shape == theirs.shape == (68994, 20)
    for j in range(20):
        np.testing.assert_array_equal(ours[:, j] == 0, theirs[:, j] == 0)
        pairs = np.unique(np.stack([ours[:, j], theirs[:, j]], axis=1), axis=0)
        assert len(np.unique(pairs[:, 0])) == len(np.unique(pairs[:, 1])) == len(pairs)


@pytest.mark.slow
@needs_data
def test_pos_attribute_count_on_ewt():
    train = read_conllu(Path(DATA_DIR) / "ud_english_ewt/en_ewt-ud-train.conllu.gz")
    enc = make_encoder("pos")
    data = enc.fit_transform(train)
    assert TEMPLATE_SETS["pos"].min_count == 3
    assert enc.n_attributes == plain_pos_attribute_count(train.tokens) == 59045
    assert data.n_labels == 49 and np.diff(data.attr_offsets).max() == 13
    unpruned = TemplateEncoder(dataclasses.replace(TEMPLATE_SETS["pos"], min_count=1))
    assert unpruned.fit(train.head(2000)).n_attributes > enc.n_attributes / 2


def plain_pos_attribute_count(sentences, min_count=3):
    """The "pos" set of crfsdca/features/templates.py in plain Python: 13 templates over the word,
    its
    NER shape and its 3-suffix, positional pads (__BOS1__, __BOS2__, ...), values seen >=
    min_count times."""

    def shape(word):
        return "".join("X" if "A" <= c <= "Z" else "x" for c in word)

    def suf3(word):
        return word[-3:] if len(word) > 3 else "short"

    fields = {"w": lambda w: w, "suf3": suf3, "shape": shape}
    templates = [("w", (0,)), ("w", (-1,)), ("w", (-2,)), ("w", (1,)), ("w", (2,))]
    templates += [("w", (-1, 0)), ("w", (0, 1))]
    templates += [(f, (o,)) for f in ("suf3", "shape") for o in (-1, 0, 1)]
    total = 0
    for name, offsets in templates:
        counts = Counter()
        for sentence in sentences:
            words = [token[0] for token in sentence]
            T = len(words)
            for t in range(T):
                parts = []
                for o in offsets:
                    u = t + o
                    if u < 0:
                        parts.append(f"__BOS{-u}__")
                    elif u >= T:
                        parts.append(f"__EOS{u - T + 1}__")
                    else:
                        parts.append(fields[name](words[u]))
                counts["|".join(parts)] += 1
        total += sum(c >= min_count for c in counts.values())
    return total
