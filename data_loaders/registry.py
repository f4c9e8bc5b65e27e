"""The registered datasets and the functions that find, read and encode them."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from crfsdca.features import encoded_cache
from crfsdca.features.attributes import make_encoder
from crfsdca.features.sequences import SequenceData
from crfsdca.io import DenseCorpus, TokenCorpus
from data_loaders import conll2000, conll2002, download, ewt, ocr
from data_loaders.download import DatasetNotFoundError, default_cache_dir, locate, search_dirs
from data_loaders.spec import Dataset

SPLITS = ("train", "test")

#: Registered datasets by name.
DATASETS: dict[str, Dataset] = {
    m.DATASET.name: m.DATASET for m in (conll2000, conll2002, ocr, ewt)
}  # fmt: skip


def get_dataset(name: str) -> Dataset:
    """The registered :class:`Dataset` called ``name``."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")
    return DATASETS[name]


def find_data_file(
    name: str,
    relpath: str,
    data_dir: str | os.PathLike | None = None,
    *,
    allow_download: bool = True,
    cache_dir: str | os.PathLike | None = None,
) -> Path:
    """Path of file ``relpath`` of dataset ``name``, downloading it to the cache if needed.

    Looks in ``data_dir``, then ``$CRFSDCA_DATA_DIR``, then the cache (``cache_dir``, else
    ``$CRFSDCA_CACHE_DIR``, else ``~/.cache/crfsdca``); then downloads into the cache.

    Raises
    ------
    DatasetNotFoundError
        Not found and not downloadable; the message lists every place looked in.
    """
    datafile = get_dataset(name).file(relpath)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    found = locate(relpath, search_dirs(data_dir, cache))
    if found is not None:
        return found
    looked = ", ".join(
        [
            f"--data-dir {data_dir}" if data_dir is not None else "--data-dir (not given)",
            f"$CRFSDCA_DATA_DIR {os.environ.get('CRFSDCA_DATA_DIR') or '(not set)'}",
            f"cache {cache}",
        ]
    )
    if allow_download:
        try:
            return download.download_file(datafile, cache)
        except OSError as exc:
            failure = f"download failed ({exc})"
    else:
        failure = "download not attempted"
    raise DatasetNotFoundError(
        f"dataset {name!r}: {relpath} not found; looked in {looked}; {failure}. Point crfsdca at"
        f" a local copy with --data-dir DIR or CRFSDCA_DATA_DIR=DIR, where DIR/{relpath}"
        " (gzipped or not) exists"
    )


def load_dataset(
    name: str, split: str = "train", data_dir: str | os.PathLike | None = None
) -> TokenCorpus | DenseCorpus:
    """Raw corpus of one split of a registered dataset (see :func:`find_data_file`)."""
    dataset = get_dataset(name)
    split, info = dataset.split(split)
    return dataset.reader(find_data_file(name, info.relpath, data_dir), split)


def load_encoded(
    name: str,
    template: str | None = None,
    data_dir: str | os.PathLike | None = None,
    max_sequences: int | None = None,
) -> tuple[Any, SequenceData, SequenceData]:
    """Encoder fitted on the train split, and the encoded train and test splits.

    Parameters
    ----------
    name : str
        A key of ``DATASETS``.
    template : str, optional
        Encoder name for :func:`crfsdca.features.attributes.make_encoder`; default: the dataset's.
    data_dir : path, optional
        Folder holding the data files (see :func:`find_data_file`).
    max_sequences : int, optional
        Train on the first ``max_sequences`` training sequences only (quick experiments); the
        test split is always complete, so scores stay comparable.

    A second call with the same inputs loads the result from the cache
    (:mod:`crfsdca.features.encoded_cache`).
    """
    dataset = get_dataset(name)
    template = template or dataset.default_template
    splits = [dataset.split(s) for s in SPLITS]
    files = [find_data_file(name, info.relpath, data_dir) for _, info in splits]

    def encode() -> tuple[Any, SequenceData, SequenceData]:
        train_corpus, test_corpus = (
            dataset.reader(f, split) for f, (split, _) in zip(files, splits, strict=True)
        )
        if max_sequences is not None:
            train_corpus = train_corpus.head(max_sequences)
        encoder = make_encoder(template)
        train = encoder.fit_transform(train_corpus)
        test = encoder.transform(test_corpus)
        return encoder, _named(train, name, "train"), _named(test, name, "test")

    inputs = {"dataset": name, "template": template, "max_sequences": max_sequences}
    return encoded_cache.cached(default_cache_dir(), encoded_cache.key(inputs, files), encode)


def _named(data: SequenceData, name: str, split: str) -> SequenceData:
    meta = {**data.meta, "dataset": name, "split": split}
    return dataclasses.replace(data, name=f"{name}:{split}", meta=meta)


def dataset_info(name: str, data_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """JSON-serialisable description: splits with expected sizes, files, where found."""
    dataset = get_dataset(name)
    dirs = search_dirs(data_dir, default_cache_dir())
    files = []
    for f in dataset.files:
        found = locate(f.relpath, dirs)
        urls = [s.url + (f" ({s.member})" if s.member else "") for s in f.sources]
        files.append({"path": f.relpath, "sha256": f.sha256, "urls": urls, "found": found})
    return {
        "name": dataset.name,
        "description": dataset.description,
        "format": dataset.format,
        "default_template": dataset.default_template,
        "splits": {k: dataclasses.asdict(v) for k, v in dataset.splits.items()},
        "split_aliases": dict(dataset.aliases),
        "files": files,
        "license": dataset.license,
    }
