"""Checks of the data given to ``crfsdca.CRF.fit``: one clear ValueError naming what is wrong.

``fit([], [])``, a training set without a token, ``y = None``, a ``None`` sequence in ``X`` or
``y`` get a message naming the argument and the index, before any encoding or training (the
feature-dict encoder then checks the tokens and labels themselves).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["check_training_data"]


def _as_list(data: Any, name: str) -> list[Any]:
    if data is None:
        raise ValueError(f"{name} is None; expected a list of sequences")
    if isinstance(data, (str, bytes, Mapping)):
        raise TypeError(f"{name}: expected a list of sequences; got {type(data).__name__}")
    try:
        return list(data)
    except TypeError:
        raise TypeError(
            f"{name}: expected a list of sequences; got {type(data).__name__}"
        ) from None


def check_training_data(
    X: Sequence[Sequence[Any]], y: Sequence[Sequence[str]], x_name: str, y_name: str
) -> tuple[list[Any], list[Any]]:
    """``X`` and ``y`` as lists, after checking that they hold labelled sequences."""
    X, y = _as_list(X, x_name), _as_list(y, y_name)
    if not X and not y:
        raise ValueError(
            f"{x_name} and {y_name} are empty: training needs at least one labelled sequence"
        )
    for data, name in ((X, x_name), (y, y_name)):
        bad = next((i for i, seq in enumerate(data) if seq is None), None)
        if bad is not None:
            what = "labels" if name == y_name else "feature dicts"
            raise ValueError(f"{name}[{bad}] is None; expected a list of {what}")
    if len(X) == len(y) and not any(len(seq) for seq in X):
        raise ValueError(
            f"{x_name} has {len(X)} sequence(s) but no token: training needs labelled tokens"
        )
    return X, y
