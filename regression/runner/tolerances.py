"""A quantity's tolerances as a case writes them ('loss rtol=1e-5; lr exact'),
and the pass rule that applies them."""

import fnmatch

import numpy as np

from .quantities import FINAL_QUANTITIES, QUANTITIES, CaseError


class Tol:
    """The tolerances of one quantity: a default (rtol, atol) and, for final
    quantities, overrides for the entries whose name matches a pattern."""

    def __init__(self):
        self.default = (0.0, 0.0)
        self.by_name = []            # [(glob, (rtol, atol))], later ones win

    def selector(self, label):
        """The last pattern that matches label, or None for the default."""
        sel = None
        for pat, _ in self.by_name:
            if fnmatch.fnmatchcase(str(label), pat):
                sel = pat
        return sel

    def of(self, label):
        sel = self.selector(label)
        return self.default if sel is None else dict(self.by_name)[sel]

    def text(self):
        def one(t):
            return "exact" if t == (0.0, 0.0) else "rtol %g, atol %g" % t
        return "; ".join([one(self.default)] + ["%s: %s" % (p, one(t)) for p, t in self.by_name])


def parse_tolerances(text, where, into):
    """'loss rtol=1e-5 atol=0; grad_norm rtol=1e-4; lr exact; param_norm@*.k atol=0.05'
    -> into[q] = Tol.  Omitted rtol/atol are 0 (exact)."""
    for part in text.split(";"):
        words = part.split()
        if not words:
            continue
        q, _, pat = words[0].partition("@")
        if q not in QUANTITIES:
            raise CaseError("%s: unknown quantity '%s' (known: %s)" % (where, q, " ".join(QUANTITIES)))
        if pat and q not in FINAL_QUANTITIES:
            raise CaseError("%s: '%s': a @pattern selects tensors, only for %s"
                            % (where, words[0], " ".join(FINAL_QUANTITIES)))
        rtol, atol = parse_bounds(words[1:], where)
        tol = into.setdefault(q, Tol())
        if pat:
            tol.by_name.append((pat, (rtol, atol)))
        else:
            tol.default = (rtol, atol)


def parse_bounds(words, where):
    """['rtol=1e-5', 'atol=0'] or ['exact'] -> (rtol, atol); omitted ones are 0."""
    rtol = atol = 0.0
    for w in words:
        if w == "exact":
            rtol = atol = 0.0
            continue
        k, eq, v = w.partition("=")
        if not eq or k not in ("rtol", "atol"):
            raise CaseError("%s: '%s': expected rtol=X, atol=X or exact" % (where, w))
        try:
            val = float(v)
        except ValueError:
            raise CaseError("%s: '%s' is not a number" % (where, w)) from None
        if not val >= 0:
            raise CaseError("%s: %s must be >= 0" % (where, w))
        if k == "rtol":
            rtol = val
        else:
            atol = val
    return rtol, atol


def rel_err(got, exp):
    d = abs(got - exp)
    if d == 0 or (np.isnan(got) and np.isnan(exp)) or got == exp:
        return 0.0
    return d / abs(exp) if exp != 0 else float("inf")


def within(got, exp, rtol, atol):
    """The pass rule: |got - exp| <= atol + rtol*|exp|; NaN matches only NaN."""
    if np.isnan(exp) or np.isnan(got):
        return bool(np.isnan(exp) and np.isnan(got))
    if got == exp:
        return True
    return abs(got - exp) <= atol + rtol * abs(exp)
