"""Taskar et al.'s handwritten words (OCR): 16 x 8 binary letter images, words of 3-14 letters.

The OCR task of Le Priol et al. (2018), dense attributes (128 pixels), encoder ``ocr`` (labels
a-z in alphabetical order, as in the SAG4CRF files). Split of the sdca4crf code: fold 0 is the
test set (626 words, 4,617 letters), folds 1-9 the training set (6,251 words, 47,535 letters);
``all`` gives the 6,877 words.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crfsdca.io import DenseCorpus, read_ocr
from data_loaders.spec import DataFile, Dataset, Source, SplitInfo

TEST_FOLD = 0


def read(path: Path, split: str) -> DenseCorpus:
    """Read ``letter.data`` and keep the words of ``split`` (train: folds 1-9, test: fold 0)."""
    corpus = read_ocr(path)
    if split == "all":
        return corpus
    keep = corpus.folds == TEST_FOLD if split == "test" else corpus.folds != TEST_FOLD
    return corpus.subset(np.flatnonzero(keep))


_FILE = "ocr/letter.data.gz"

DATASET = Dataset(
    name="ocr",
    description="Taskar OCR handwritten words, fold 0 = test (OCR in Le Priol et al. 2018)",
    format="ocr",
    default_template="ocr",
    files=(
        DataFile(
            _FILE,
            "535363d0b7bc34246b1f8731719540f526b6807b12dda5d430d011d160bc7882",
            (Source("http://ai.stanford.edu/~btaskar/ocr/letter.data.gz"),),
        ),
    ),
    splits={
        "train": SplitInfo(_FILE, 6251, 47535, 26),
        "test": SplitInfo(_FILE, 626, 4617, 26),
        "all": SplitInfo(_FILE, 6877, 52152, 26),
    },
    reader=read,
    license="research use (Taskar's OCR page; no explicit license)",
)
