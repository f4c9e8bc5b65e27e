"""CoNLL-2002 named entities, Dutch (``ned.train`` / ``ned.testa`` / ``ned.testb``).

The NER task of Le Priol et al. (2018); default template ``ner`` (A = 310,983). Fields
``word POS``, label = IOB2 entity tag. ``-DOCSTART-`` lines are **kept** as ordinary tokens
labelled ``O``: they open the first sentence of each article, the official token counts
include them, and so do the SAG4CRF features behind the paper's numbers (``NER_test.mat``);
``A = 310,983`` is only reached with them. Splits: train, dev (= testa), test (= testb).
"""

from __future__ import annotations

from pathlib import Path

from crfsdca.io import TokenCorpus, read_conll
from data_loaders.spec import DataFile, Dataset, Source, SplitInfo

_NLTK_ZIP = (
    "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/conll2002.zip"
)


def read(path: Path, split: str) -> TokenCorpus:
    """Read one split file; fields ``(w, pos)``; ``-DOCSTART-`` kept as a token."""
    return read_conll(path, field_names=("w", "pos"), docstart="keep")


def _file(name: str, sha256: str) -> DataFile:
    return DataFile(f"conll2002_ned/{name}.gz", sha256, (Source(_NLTK_ZIP, f"conll2002/{name}"),))


DATASET = Dataset(
    name="conll2002-ned",
    description="CoNLL-2002 Dutch named entities (NER in Le Priol et al. 2018)",
    format="conll",
    default_template="ner",
    files=(
        _file("ned.train", "0a419dcb356b62c8cff38515675550b3d5dbea9f45a1c4956328dbd5cc7fcdbc"),
        _file("ned.testa", "51259d4bfe52462f211d3d0b67173a7ecbfa296e199f6c6bd0895f4c78155057"),
        _file("ned.testb", "2aa748edb82e6f9c4d82e57a4bed69ded18cfa4803122c75070335d513517488"),
    ),
    splits={
        "train": SplitInfo("conll2002_ned/ned.train.gz", 15806, 202931, 9),
        "dev": SplitInfo("conll2002_ned/ned.testa.gz", 2895, 37761, 9),
        "test": SplitInfo("conll2002_ned/ned.testb.gz", 5195, 68994, 9),
    },
    reader=read,
    license="research use in the context of the CoNLL-2002 shared task only",
    aliases={"testa": "dev", "testb": "test"},
)
