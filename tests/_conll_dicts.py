"""CoNLL-2000 sentences as sklearn-crfsuite feature dicts (its tutorial's features), for the
tests that compare crfsdca.CRF with python-crfsuite on the real corpus."""

from __future__ import annotations

import os

import pytest


def token_dicts(tokens):
    """sklearn-crfsuite's tutorial features of (word, POS) tokens."""
    out = []
    for sent in tokens:
        seq = []
        for t, (word, pos) in enumerate(sent):
            item = {
                "bias": 1.0, "w": word.lower(), "suf3": word[-3:], "pos": pos,
                "upper": word.isupper(), "title": word.istitle(), "digit": word.isdigit(),
            }  # fmt: skip
            if t:
                item.update({"-1:w": sent[t - 1][0].lower(), "-1:pos": sent[t - 1][1]})
            else:
                item["BOS"] = True
            if t + 1 < len(sent):
                item.update({"+1:w": sent[t + 1][0].lower(), "+1:pos": sent[t + 1][1]})
            else:
                item["EOS"] = True
            seq.append(item)
        out.append(seq)
    return out


def conll_dicts(split: str, n: int | None = None):
    data_loaders = pytest.importorskip("data_loaders")
    if not os.environ.get("CRFSDCA_DATA_DIR"):
        pytest.skip("CRFSDCA_DATA_DIR is not set")
    try:
        data_loaders.find_data_file("conll2000", f"conll2000/{split}.txt.gz", allow_download=False)
    except data_loaders.DatasetNotFoundError as err:
        pytest.skip(str(err))
    corpus = data_loaders.load_dataset("conll2000", split)
    if n is not None:
        corpus = corpus.head(n)
    return token_dicts(corpus.tokens), [list(s) for s in corpus.labels]
