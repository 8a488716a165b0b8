"""The case files: regression/cases/NAME.nml, a deck whose leading '!' lines
say how to run it and what to compare (docs/regression.md, "The case file")."""

import glob
import os
import re

from .quantities import FINAL_QUANTITIES, MEMORY_COLUMNS, CaseError
from .tolerances import parse_tolerances

META_KEYS = ("ranks", "twin", "compare", "twin_compare", "twin_differs", "twin_memory", "run", "setup",
             "needs", "skip", "expect_log", "timeout")

DEFAULT_TIMEOUT = 300    # seconds per triad run


def parse_memory(text, where):
    """'gradients < 0.75; parameters,gradients,optimizer < 1' ->
    [(('gradients',), '<', 0.75), ...]"""
    out = []
    for item in [t.strip() for t in text.split(";") if t.strip()]:
        m = re.match(r"([a-z,]+)\s*(<=|<)\s*([0-9.eE+-]+)$", item)
        if not m:
            raise CaseError("%s: twin_memory: '%s' is not 'COLUMNS < FACTOR' (e.g. gradients < 0.75)"
                            % (where, item))
        cols = tuple(m.group(1).split(","))
        bad = [c for c in cols if c not in MEMORY_COLUMNS]
        if bad:
            raise CaseError("%s: twin_memory: unknown column '%s' (known: %s)"
                            % (where, bad[0], ", ".join(MEMORY_COLUMNS)))
        try:
            factor = float(m.group(3))
        except ValueError:
            raise CaseError("%s: twin_memory: '%s' is not a number" % (where, m.group(3))) from None
        out.append((cols, m.group(2), factor))
    return out


class Case:
    """A deck regression/cases/NAME.nml and the metadata of its leading '!' lines."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        self.ranks = 1
        self.twin = None
        self.compare = {}
        self.twin_compare = {}
        self.twin_differs = []
        self.twin_memory = []     # [(columns, op, factor)]: rank 0's bytes against the twin's
        self.runs = []            # [(ranks or None, [override, ...])]
        self.setup = []
        self.needs = []
        self.skip = None
        self.expect_log = []
        self.timeout = DEFAULT_TIMEOUT
        self.doc = ""
        self.error = None
        try:
            self._parse()
        except CaseError as e:
            self.error = str(e)
        if not self.runs:
            self.runs = [(None, [])]

    def _parse(self):
        with open(self.path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for n, line in enumerate(lines, 1):
            s = line.strip()
            if not s:
                continue
            if not s.startswith("!"):
                break                 # the metadata block ends at the first deck line
            body = s.lstrip("!").strip()
            m = re.match(r"([a-z_]+):\s*(.*)$", body)
            if not m:
                if not self.doc and body:
                    self.doc = re.sub(r"^%s(\.nml)?\s+--\s+" % re.escape(self.name), "", body)
                continue
            self._meta(m.group(1), m.group(2).strip(), "%s.nml:%d" % (self.name, n))
        self._check()

    def _meta(self, key, val, where):
        """One metadata line 'key: val' at where (NAME.nml:LINE)."""
        if key not in META_KEYS:
            raise CaseError("%s: unknown metadata key '%s:' (known: %s)"
                            % (where, key, ", ".join(META_KEYS)))
        if key == "ranks":
            self.ranks = self._int(val, where)
        elif key == "twin":
            self.twin = val
        elif key == "compare":
            parse_tolerances(val, where, self.compare)
        elif key == "twin_compare":
            parse_tolerances(val, where, self.twin_compare)
        elif key == "twin_differs":
            self.twin_differs += val.split()
        elif key == "twin_memory":
            self.twin_memory += parse_memory(val, where)
        elif key == "run":
            self.runs.append(self._run(val, where))
        elif key == "setup":
            self.setup.append(val)
        elif key == "needs":
            self.needs.append(val)
            if (val.split() or [""])[0] not in ("gpu", "program"):
                raise CaseError("%s: unknown need '%s' (known: gpu, program NAME)" % (where, val))
        elif key == "skip":
            self.skip = val or "marked skip"
        elif key == "expect_log":
            try:
                re.compile(val)
            except re.error as e:
                raise CaseError("%s: expect_log: bad regular expression: %s" % (where, e)) from None
            self.expect_log.append(val)
        elif key == "timeout":
            self.timeout = self._int(val, where)

    def _run(self, val, where):
        """'ranks=2 train.steps=6 ...' -> (2, ['train.steps=6', ...])"""
        ranks, over = None, []
        for w in val.split():
            if w.startswith("ranks="):
                ranks = self._int(w[6:], where)
            else:
                over.append(w)
        return ranks, over

    def _check(self):
        """The rules between the metadata lines."""
        if self.twin_memory and not self.twin:
            raise CaseError("%s.nml: 'twin_memory:' without 'twin:'" % self.name)
        if self.twin and not self.twin_compare:
            raise CaseError("%s.nml: 'twin: %s' without 'twin_compare:'" % (self.name, self.twin))
        if self.twin == self.name:
            raise CaseError("%s.nml: a case cannot be its own twin" % self.name)

    @staticmethod
    def _int(val, where):
        try:
            v = int(val)
        except ValueError:
            raise CaseError("%s: '%s' is not an integer" % (where, val)) from None
        if v < 1:
            raise CaseError("%s: %d must be >= 1" % (where, v))
        return v

    def max_ranks(self):
        return max(r or self.ranks for r, _ in self.runs)

    def wants_final(self, which):
        return any(q in FINAL_QUANTITIES for q in which)


def load_cases(casedir):
    paths = sorted(glob.glob(os.path.join(casedir, "*.nml")))
    return {c.name: c for c in map(Case, paths)}
