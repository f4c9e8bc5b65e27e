"""Universal Dependencies English-EWT r2.16, tagged with its PTB-style XPOS column.

A freely available substitute for the Penn Treebank WSJ of the paper's POS task; default
template ``pos``. Labels: 49 XPOS tags in train (the PTB tags plus ADD AFX GW HYPH NFP).
Multiword-token ranges and empty nodes are skipped; tokens are the syntactic words.
"""

from __future__ import annotations

from pathlib import Path

from crfsdca.io import TokenCorpus, read_conllu
from data_loaders.spec import DataFile, Dataset, Source, SplitInfo

_BASE = "https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/r2.16"


def read(path: Path, split: str) -> TokenCorpus:
    """Read one split file; fields ``(w, upos)``, label = XPOS."""
    return read_conllu(path, tag="xpos")


def _file(split: str, sha256: str) -> DataFile:
    name = f"en_ewt-ud-{split}.conllu"
    return DataFile(f"ud_english_ewt/{name}.gz", sha256, (Source(f"{_BASE}/{name}"),))


DATASET = Dataset(
    name="ewt-pos",
    description="UD English-EWT r2.16, XPOS tagging (substitute for the paper's PTB POS task)",
    format="conllu",
    default_template="pos",
    files=(
        _file("train", "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"),
        _file("dev", "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6"),
        _file("test", "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"),
    ),
    splits={
        "train": SplitInfo("ud_english_ewt/en_ewt-ud-train.conllu.gz", 12544, 204577, 49),
        "dev": SplitInfo("ud_english_ewt/en_ewt-ud-dev.conllu.gz", 2001, 25147, 49),
        "test": SplitInfo("ud_english_ewt/en_ewt-ud-test.conllu.gz", 2077, 25094, 48),
    },
    reader=read,
    license="CC BY-SA 4.0",
)
