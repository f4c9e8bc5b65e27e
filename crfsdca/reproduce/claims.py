"""The paper's claims, checked on the traces: what we measured and how sure the verdict is.

Each claim is one checker in the registry (``registry.CLAIMS``), defined in
``claims_figures`` (the figures' claims) and ``claims_text`` (the text's claims and the
reproduction's fidelity), its rule in its docstring; the rules build on the whole-curve races
of ``verdicts``. Verdicts: "holds", "partly", "does not hold", "not judged" (a trace missing,
or the run lacks what the claim needs); "measurement" for numbers that are not claims.
"""

from __future__ import annotations

from crfsdca.reproduce import claims_figures, claims_text  # noqa: F401 - they register
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


def check_claims(
    traces: Traces,
    budgets: dict[str, Budget],
    *,
    smoke: bool = False,
    density: dict[str, float] | None = None,
) -> list[Claim]:
    """Every registered claim whose datasets are in ``budgets``, in registration order.

    ``smoke``: the budgets are --quick sizes; every claim is marked as a smoke test.
    ``density``: a/A of each dataset's training subset (for the sparsity claim).
    """
    costs = Costs(traces)
    costs.density = density or {}
    return [
        spec.judge(costs, budgets, smoke=smoke) for spec in CLAIMS.values() if spec.applies(budgets)
    ]
