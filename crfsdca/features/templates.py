"""Attribute templates: what a token's attributes are, before any corpus is seen.

A *template* is a tuple of ``(field, offset)`` parts; at position ``t`` its value is the fields
at ``t + offset`` joined with ``|`` and its attribute is the pair (template, value), named
``"w[-1]|w[0]=the|cat"`` as in CRFsuite's ``crfutils.apply_templates``. Out-of-range offsets
are handled by the template set's ``padding``:

- ``"none"``: the attribute is dropped (CRFsuite);
- ``"per-template"``: one pad symbol, the same at every distance (SAG4CRF CONLL);
- ``"positional"``: ``__BOS1__``, ``__BOS2__``, ... before and ``__EOS1__``, ... after the
  sequence, so ``w[-2]`` differs at t = 0 and t = 1 (SAG4CRF NER and POS).

A user-defined template set is a :class:`TemplateSet`, or the dict of
:meth:`TemplateSet.to_dict` (e.g. loaded from JSON)::

    TemplateSet.from_dict({"name": "mine", "field_names": ["w", "pos"],
                           "templates": [[["w", 0]], [["w", -1], ["w", 0]], [["pos", 0]]],
                           "derived_fields": [["shape", "shape", "w"]],
                           "padding": "positional", "min_count": 2})

:class:`~crfsdca.features.template_encoder.TemplateEncoder` turns a corpus into the attributes
of a template set.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "DERIVED_FUNCTIONS",
    "TEMPLATE_SETS",
    "Padding",
    "Template",
    "TemplateSet",
    "suffix3",
    "word_shape",
]

Padding = Literal["none", "per-template", "positional"]
SHORT = "__SHORT__"


def word_shape(word: str) -> str:
    """``X`` for each ASCII capital A-Z, ``x`` for any other character ("CV70" -> "XXxx")."""
    return "".join("X" if "A" <= c <= "Z" else "x" for c in word)


def suffix3(word: str) -> str:
    """The last 3 characters of a word longer than 3, else one shared value ``__SHORT__``."""
    return word[-3:] if len(word) > 3 else SHORT


DERIVED_FUNCTIONS: dict[str, Callable[[str], str]] = {
    "shape": word_shape,
    "suf3": suffix3,
    "lower": str.lower,
}


@dataclass(frozen=True)
class Template:
    """A named tuple of ``(field, offset)`` parts."""

    name: str
    parts: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        parts = tuple((str(f), int(o)) for f, o in self.parts)
        if not parts:
            raise ValueError(f"template {self.name!r} needs at least one (field, offset) part")
        object.__setattr__(self, "parts", parts)

    @classmethod
    def of(cls, *parts: tuple[str, int]) -> Template:
        """Template named CRFsuite-style from its parts: ``of(("w", -1), ("w", 0))`` is
        ``w[-1]|w[0]``."""
        return cls("|".join(f"{f}[{o}]" for f, o in parts), tuple(parts))


@dataclass(frozen=True)
class TemplateSet:
    """Everything that defines the attributes of a token corpus.

    Parameters
    ----------
    name : str
        Registry key and the ``template`` entry of ``SequenceData.meta``.
    field_names : tuple of str
        Names of the corpus's token fields, by position (labels excluded).
    templates : tuple of Template
    lowercase_fields : tuple of str
        Fields lowercased before use (after the derived fields are computed).
    derived_fields : tuple of (name, function, source)
        Extra fields ``DERIVED_FUNCTIONS[function](source field)``, e.g. ``("shape", "shape",
        "w")``, computed from the raw source field.
    min_count : int
        Keep a template value when it occurs at least this often in the training corpus.
    padding : {"none", "per-template", "positional"}
        Out-of-range offsets (see the module docstring).
    bos_eos : bool
        Add attributes ``__BOS__`` to the first and ``__EOS__`` to the last token (CRFsuite).
    default_bias_rows : int
        Number of bias rows (0 or 3) a model trained on these attributes uses by default.
    """

    name: str
    field_names: tuple[str, ...]
    templates: tuple[Template, ...]
    lowercase_fields: tuple[str, ...] = ()
    derived_fields: tuple[tuple[str, str, str], ...] = ()
    min_count: int = 1
    padding: Padding = "none"
    bos_eos: bool = False
    default_bias_rows: int = 3

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "field_names", tuple(self.field_names))
        set_(self, "templates", tuple(self.templates))
        set_(self, "lowercase_fields", tuple(self.lowercase_fields))
        set_(self, "derived_fields", tuple(tuple(d) for d in self.derived_fields))
        known = set(self.field_names)
        for d in self.derived_fields:
            if len(d) != 3 or d[1] not in DERIVED_FUNCTIONS or d[2] not in known:
                raise ValueError(
                    f"template set {self.name!r}: derived field {d!r} must be (name, function,"
                    f" source) with function in {sorted(DERIVED_FUNCTIONS)} and a known source"
                )
            known.add(d[0])
        used = {f for t in self.templates for f, _ in t.parts} | set(self.lowercase_fields)
        if used - known:
            raise ValueError(
                f"template set {self.name!r}: unknown fields {sorted(used - known)}; "
                f"expected fields among {sorted(known)}"
            )
        if not self.templates or len({t.name for t in self.templates}) != len(self.templates):
            raise ValueError(f"template set {self.name!r}: expected non-empty unique templates")
        if self.padding not in ("none", "per-template", "positional"):
            raise ValueError(
                f"padding must be none, per-template or positional; got {self.padding}"
            )
        if self.min_count < 1:
            raise ValueError(f"min_count must be >= 1; got {self.min_count}")
        if self.default_bias_rows not in (0, 3):
            raise ValueError(f"default_bias_rows must be 0 or 3; got {self.default_bias_rows}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable definition; :meth:`from_dict` inverts it."""
        return {
            "name": self.name,
            "field_names": list(self.field_names),
            "templates": [[t.name, [list(p) for p in t.parts]] for t in self.templates],
            "lowercase_fields": list(self.lowercase_fields),
            "derived_fields": [list(d) for d in self.derived_fields],
            "min_count": self.min_count,
            "padding": self.padding,
            "bos_eos": self.bos_eos,
            "default_bias_rows": self.default_bias_rows,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TemplateSet:
        """Build from :meth:`to_dict` output; a template may also be a bare list of parts."""
        d = dict(d)
        d["templates"] = tuple(_template_from_json(t) for t in d["templates"])
        return cls(**d)


def _template_from_json(t: Any) -> Template:
    if isinstance(t, Template):
        return t
    if len(t) == 2 and isinstance(t[0], str):
        return Template(t[0], tuple(tuple(p) for p in t[1]))
    return Template.of(*(tuple(p) for p in t))


def _ngrams(field: str, offsets: Sequence[Sequence[int]]) -> list[Template]:
    return [Template.of(*((field, o) for o in group)) for group in offsets]


_CHUNKING = (
    _ngrams("w", [[-2], [-1], [0], [1], [2], [-1, 0], [0, 1]])
    + _ngrams("pos", [[-2], [-1], [0], [1], [2], [-2, -1], [-1, 0], [0, 1], [1, 2]])
    + _ngrams("pos", [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]])
)
_NER = (
    _ngrams("w", [[0], [-1], [1], [-1, 0], [0, 1]])
    + _ngrams("pos", [[-2], [-1], [0], [1], [2], [-2, -1], [-1, 0], [0, 1], [1, 2]])
    + _ngrams("pos", [[-2, -1, 0], [-1, 0, 1], [0, 1, 2]])
    + _ngrams("shape", [[-1], [0], [1]])
)
_POS = (
    _ngrams("w", [[0], [-1], [-2], [1], [2], [-1, 0], [0, 1]])
    + _ngrams("suf3", [[-1], [0], [1]])
    + _ngrams("shape", [[-1], [0], [1]])
)

#: Built-in template sets: CRFsuite's chunking.py (conll, crfsuite-chunking) and SAG4CRF's
#: encodings (ner, pos);
#: tests/test_attributes.py checks their sizes against Le Priol et al. (2018, Table 1).
TEMPLATE_SETS: dict[str, TemplateSet] = {
    ts.name: ts
    for ts in (
        TemplateSet(
            "conll", ("w", "pos"), tuple(_CHUNKING), lowercase_fields=("w",), min_count=3,
            padding="per-template",
        ),
        TemplateSet(
            "ner", ("w", "pos"), tuple(_NER), derived_fields=(("shape", "shape", "w"),),
            padding="positional",
        ),
        TemplateSet(
            "pos", ("w",), tuple(_POS), min_count=3, padding="positional",
            derived_fields=(("shape", "shape", "w"), ("suf3", "suf3", "w")),
        ),
        TemplateSet(
            "crfsuite-chunking", ("w", "pos"), tuple(_CHUNKING), padding="none", bos_eos=True,
            default_bias_rows=0,
        ),
    )
}  # fmt: skip
