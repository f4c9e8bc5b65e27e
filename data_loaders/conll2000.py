"""CoNLL-2000 chunking (WSJ sections 15-18 train, 20 test): ``word POS chunk`` per line.

The CONLL task of Le Priol et al. (2018); default template ``conll`` (A = 74,658). The test
set holds one label absent from training (``I-LST``, 2 tokens), encoded as -1.
"""

from __future__ import annotations

from pathlib import Path

from crfsdca.io import TokenCorpus, read_conll
from data_loaders.spec import DataFile, Dataset, Source, SplitInfo

_NLTK_ZIP = (
    "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/conll2000.zip"
)
_CLIPS = "https://www.clips.uantwerpen.be/conll2000/chunking"


def read(path: Path, split: str) -> TokenCorpus:
    """Read one split file; fields ``(w, pos)``, label = chunk tag."""
    return read_conll(path, field_names=("w", "pos"))


DATASET = Dataset(
    name="conll2000",
    description="CoNLL-2000 chunking, WSJ 15-18 / 20 (CONLL in Le Priol et al. 2018)",
    format="conll",
    default_template="conll",
    files=(
        DataFile(
            "conll2000/train.txt.gz",
            "82033cd7a72b209923a98007793e8f9de3abc1c8b79d646c50648eb949b87cea",
            (Source(f"{_CLIPS}/train.txt.gz"), Source(_NLTK_ZIP, "conll2000/train.txt")),
        ),
        DataFile(
            "conll2000/test.txt.gz",
            "73b7b1e565fa75a1e22fe52ecdf41b6624d6f59dacb591d44252bf4d692b1628",
            (Source(f"{_CLIPS}/test.txt.gz"), Source(_NLTK_ZIP, "conll2000/test.txt")),
        ),
    ),
    splits={
        "train": SplitInfo("conll2000/train.txt.gz", 8936, 211727, 22),
        "test": SplitInfo("conll2000/test.txt.gz", 2012, 47377, 19),
    },
    reader=read,
    license="WSJ text (LDC); distributed for research by the CoNLL-2000 shared task",
)
