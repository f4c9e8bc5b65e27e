"""The paper's claims, checked on the traces: what we measured and how sure the verdict is.

Each claim is one checker in the registry (``registry.CLAIMS``), defined in
``claims_figures`` (the figures' claims), ``claims_linesearch`` (§6.2, footnote 4, Fig. 8, the
cost of a line-search evaluation), ``claims_text`` (the gap estimate, the refresh, the starts,
the reproduction's fidelity) and ``claims_data`` (Table 1, App. A.1, A.2, C, the radii), its
rule in its docstring; the rules build on the whole-curve races of ``verdicts``. The rows of
the claims that read SAG runs say whether a reconstructed SAG constant changes their verdict.
Verdicts: "holds", "partly", "does not hold", "not judged" (a trace missing, or the run lacks
what the claim needs); "measurement" for numbers that are not claims.
"""

from __future__ import annotations

import contextlib

from crfsdca.reproduce import (  # noqa: F401 - they register
    claims_data,
    claims_figures,
    claims_linesearch,
    claims_text,
)
from crfsdca.reproduce.experiments import Budget
from crfsdca.reproduce.figures import Traces
from crfsdca.reproduce.registry import CLAIMS, SMOKE, Claim, ClaimSpec, Judged
from crfsdca.reproduce.verdicts import THRESHOLD, VERDICTS, Costs, Missing

__all__ = [
    "CLAIMS",
    "SMOKE",
    "THRESHOLD",
    "VERDICTS",
    "Claim",
    "ClaimSpec",
    "Costs",
    "Judged",
    "Missing",
    "check_claims",
]


#: the report's order: the figures, the line search, the gap estimate and starts, the data
ORDER = ("claims_figures", "claims_linesearch", "claims_text", "claims_data")


def check_claims(
    traces: Traces,
    budgets: dict[str, Budget],
    *,
    smoke: bool = False,
    keys: set[str] | None = None,
) -> list[Claim]:
    """Every registered claim whose datasets are in ``budgets`` (and whose key is in ``keys``,
    when given), in the report's order (ORDER).

    ``smoke``: the budgets are --quick sizes; every claim is marked as a smoke test.
    """
    costs = Costs(traces)
    specs = sorted(CLAIMS.values(), key=lambda s: ORDER.index(s.check.__module__.split(".")[-1]))
    specs = [s for s in specs if s.applies(budgets) and (keys is None or s.key in keys)]
    claims = [spec.judge(costs, budgets, smoke=smoke) for spec in specs]
    rows = []
    if any(c.key in claims_text.SAG_READERS for c in claims):
        with contextlib.suppress(Missing):
            rows = claims_text.sag_sensitivity(costs, budgets)
    for claim in claims:
        note = claims_text.sag_dependence(rows, claim.key) if not claim.measurement else ""
        if note:
            claim.measured = f"{claim.measured}. {note}" if claim.measured else note
    return claims
