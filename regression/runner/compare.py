"""Comparing one quantity of two outputs (a reference or a twin's run against
this run) under its tolerances: a one-line summary with the worst deviation,
and a table of the entries that fail."""

from .quantities import FINAL_QUANTITIES
from .tolerances import rel_err, within

TABLE_ROWS = 20          # rows of a failure table before "... and N more"


def fmt(x):
    return "%.9e" % x


def span(steps):
    if not steps:
        return "none"
    return "%d..%d (%d rows)" % (steps[0], steps[-1], len(steps))


def compare_quantity(q, exp, got, tol, subset):
    """Compare quantity q of two outputs (reference or twin `exp`, this run `got`).
    subset (against a twin): this run may cover only some of exp's steps (a restart).
    -> (ok, summary, failure table lines)"""
    source = "the twin's run" if subset else "the reference"
    if q in FINAL_QUANTITIES:
        return compare_final(q, exp, got, tol, source, subset)
    if q not in exp:
        return False, "%s has no %s" % (source, "column '%s'" % q if not subset else "/metrics/" + q), []
    if q not in got:
        return False, "metrics.h5 has no /metrics/%s" % q, []
    es, gs = list(exp["steps"]), list(got["steps"])
    if subset:
        index = {s: i for i, s in enumerate(es)}
        missing = [s for s in gs if s not in index]
        if missing:
            return False, "steps %s are not in the twin's run" % missing[:5], []
        idx = [index[s] for s in gs]
    else:
        if es != gs:
            return False, "the run has steps %s, the reference %s" % (span(gs), span(es)), []
        idx = list(range(len(es)))
    return compare_series(gs, [exp[q][i] for i in idx], list(got[q]), tol, "step")


def compare_final(q, exp, got, tol, source, subset):
    """A final quantity, tensor by tensor (param_norm) or state by state (optim_norm)."""
    e, g = exp["final"].get(q, {}), got["final"].get(q, {})
    if not e:
        return False, "%s has no %s (%s)" % (
            source, q, "no checkpoint at its last step" if subset else "no such lines"), []
    if not g:
        return False, "this run has no checkpoint at its last step (set io.save_final = .true.)", []
    if set(e) != set(g):
        miss, extra = sorted(set(e) - set(g)), sorted(set(g) - set(e))
        return False, "the tensors differ: missing %s, unexpected %s" % (
            " ".join(miss) or "none", " ".join(extra) or "none"), []
    keys = sorted(e)
    return compare_series(keys, [e[k] for k in keys], [g[k] for k in keys], tol,
                          "tensor" if q == "param_norm" else "state")


def compare_series(labels, exp, got, tol, label_head):
    """-> (ok, worst text, failure table lines).  The worst deviation is reported
    per tolerance group: the default one, then each @pattern's entries."""
    groups = {}                      # selector -> [worst rel, label, abs]
    bad = []
    for lab, e, g in zip(labels, exp, got):
        r = rel_err(g, e)
        w = groups.setdefault(tol.selector(lab), [-1.0, None, 0.0])
        if r > w[0]:
            w[:] = [r, lab, abs(g - e)]
        if not within(g, e, *tol.of(lab)):
            bad.append((lab, e, g, r))
    what = "%d %s%s" % (len(labels), label_head, "s" if len(labels) != 1 else "")
    parts = []
    for sel in sorted(groups, key=lambda k: (k is not None, k or "")):
        r, lab, absd = groups[sel]
        head = "" if sel is None else "%s: " % sel
        if r == 0:
            parts.append(head + "identical")
        else:
            parts.append(head + "worst rel err %.2e at %s %s (abs %.2e)" % (r, label_head, lab, absd))
    if not labels:
        summary = "nothing to compare"
    elif all(groups[k][0] == 0 for k in groups):
        summary = "identical in all %s" % what
    else:
        summary = "; ".join(parts) + ", " + what
    return not bad, summary, failure_table(bad, label_head)


def failure_table(bad, label_head):
    """[(label, expected, got, rel err)] -> the table's lines, at most TABLE_ROWS rows."""
    if not bad:
        return []
    w = max(len(label_head), max(len(str(b[0])) for b in bad))
    w = w if label_head == "step" else -w      # numbers to the right, names to the left
    table = ["%*s  %16s  %16s  %10s" % (w, label_head, "expected", "got", "rel err")]
    for lab, e, g, r in bad[:TABLE_ROWS]:
        table.append("%*s  %16s  %16s  %10.3e" % (w, lab, fmt(e), fmt(g), r))
    if len(bad) > TABLE_ROWS:
        table.append("... and %d more" % (len(bad) - TABLE_ROWS))
    return table
