"""Registered datasets of the paper's experiments: locate, download, read and encode them.

>>> import data_loaders
>>> encoder, train, test = data_loaders.load_encoded("conll2000")  # doctest: +SKIP

Files are looked for under ``data_dir`` / ``--data-dir``, ``$CRFSDCA_DATA_DIR`` and the cache
``~/.cache/crfsdca``, and downloaded into the cache (checked by SHA-256) when absent. Only the
public API of crfsdca (``crfsdca.io``, ``crfsdca.features.attributes``,
``crfsdca.features.sequences``) is used.
"""

from data_loaders.download import DatasetNotFoundError, default_cache_dir, sha256_of_content
from data_loaders.registry import (
    DATASETS,
    dataset_info,
    find_data_file,
    get_dataset,
    load_dataset,
    load_encoded,
)
from data_loaders.spec import DataFile, Dataset, Source, SplitInfo

__all__ = [
    "DATASETS",
    "DataFile",
    "Dataset",
    "DatasetNotFoundError",
    "Source",
    "SplitInfo",
    "dataset_info",
    "default_cache_dir",
    "find_data_file",
    "get_dataset",
    "load_dataset",
    "load_encoded",
    "sha256_of_content",
]
