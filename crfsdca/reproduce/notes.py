"""The report's prose on the starting point and on OEG's step size, with numbers from traces."""

from __future__ import annotations

from crfsdca.reproduce.experiments import SHORT, Budget, baseline, sdca
from crfsdca.reproduce.figures import Traces

START = """\
The authors' code (sdca4crf) starts the duals at the marginals of a chain Gibbs law with score 10
on every gold label and every gold transition, and w = w_hat(mu) as in eq. 16. Changing one
label of the gold path costs 10 (its node) + 10 per adjacent transition, so every wrong label has
marginal about e^-20 (sequence ends) to e^-30: the start is the empirical point up to ~1e-9,
w_hat(mu) ~ 0, and the first logged primal is P(0) = (N/n) log K (24.77 on the full OCR split),
with D ~ 0, so gap = primal. crfsdca's default epsilon-mix mu = eps u + (1 - eps) delta_gold with
eps = 1e-3 moves eps of every block's mass to the uniform law; w_hat(mu) =
(eps / (lambda n)) sum_i [F(x_i, y_i) - E_u F(x_i, .)] is a sum over all N tokens scaled by
1/(lambda n) = 1, so its norm grows with N (OCR: dense pixel attributes on 47,535 letters), which
is why crfsdca logs P = 118.7 there. Both are valid dual points; from epoch 2 on they agree. The
reproduction uses the authors' start for SDCA and OEG (figure `start` compares the two)."""

OEG = """\
Rule used: per-sequence learning rates eta_i, initially 0.5; a trial that does not increase the
dual is rejected and eta_i halved (each trial costs one oracle call); after an accepted step eta_i
is multiplied by 1.05 (capped at 1). This is the online-EG rule of Collins et al. (2008, JMLR,
experiments section) as we read it; crfsdca's default (learning_rate_growth = 1) only ever
halves, so eta_i can only shrink over a run and OEG needs ever more updates. The growth is
crfsdca's existing `learning_rate_growth` option (kernels/oeg.py); the default is unchanged."""


def notes(traces: Traces, budgets: dict[str, Budget], quick: bool) -> dict[str, str]:
    out = {"start": START, "oeg": OEG}
    rows = []
    for d in ("ocr", "conll2000", "conll2002-ned"):
        if d not in budgets:
            continue
        b = budgets[d]
        eps, gib = (traces.get(sdca(d, b, "gap", 0.8, start="epsilon")), traces.get(sdca(d, b)))
        if eps is None or gib is None:
            continue
        e0, g0 = eps.records[0], gib.records[0]
        rows.append(
            f"| {SHORT[d]} | {e0.primal:.3f} | {e0.gap:.3f} | {g0.primal:.3f} | {g0.gap:.3f} |"
        )
    if rows:
        out["start"] += (
            "\n\nMeasured at step 0 on the training subsets:\n\n"
            "| dataset | P, eps-mix | gap, eps-mix | P, authors' start | gap, authors' start |\n"
            "|---|---|---|---|---|\n" + "\n".join(rows)
        )
    oeg_rows = []
    for d, b in budgets.items():
        rules = {
            "x1.05 after success": baseline(d, b, "oeg", "OEG"),
        }
        for name, exp in rules.items():
            t = traces.get(exp)
            if t is None:
                continue
            last = t.records[-1]
            calls = last.oracle_calls / max(last.updates, 1)
            per_n = last.updates / t.header["n_sequences"]
            oeg_rows.append(f"| {SHORT[d]} | {name} | {calls:.2f} | {per_n:.1f} |")
    if oeg_rows:
        out["oeg"] += (
            "\n\n| dataset | rule | oracle calls per update | updates / n at the end |\n"
            "|---|---|---|---|\n" + "\n".join(oeg_rows)
        )
    out["command"] = "Command: `crfsdca reproduce" + (" --quick`" if quick else "`")
    return out
