"""The checks of one case, each a TAP line: its runs, the patterns its log must
match, each quantity against the stored reference (or REGENERATE=1 writing it),
and against its twin: the same problem, the same numbers, the memory bounds."""

import fnmatch
import os
import re

from .compare import compare_quantity, span
from .output import log_tail, parse_deck, read_text
from .quantities import QUANTITIES, CaseError
from .references import build_info, read_reference, write_reference

# Deck keys that describe the layout, not the problem: a case and its twin may
# differ in these without saying so (twin_differs: names more).
LAYOUT_KEYS = ("parallel.*", "io.*", "train.micro_batch_size", "train.threads",
               "train.peak_gflops", "train.recompute*", "train.device", "train.pack_activations")


class Checker:
    """Checks cases (a dict name -> Case) with the options args, running them
    through executor and printing to tap."""

    def __init__(self, args, cases, executor, tap):
        self.args = args
        self.cases = cases
        self.executor = executor
        self.tap = tap

    def check(self, case):
        name = case.name
        if case.error:
            self.tap.test(False, "%s: bad case file: %s" % (name, case.error))
            return
        res = self.executor.run_case(case)
        if res["skip"]:
            self.tap.skip(name, res["skip"])
            return
        runs = len(case.runs)
        if not res["ok"]:
            why = res.get("why", "failed")
            refused = re.search(r"^.*is not available in this build yet.*$", read_text(res.get("log")), re.M)
            if refused:
                why += "; the build refuses a feature: '%s' (until it lands, mark the case with " \
                       "'! skip: <reason>')" % refused.group(0).strip()
            self.tap.test(False, "%s: %s" % (name, why), log_tail(res))
            return
        out = res["out"]
        self.tap.test(True, "%s: %d run%s on %d rank%s, steps %s, %.1f s" % (
            name, runs, "s" if runs > 1 else "", case.max_ranks(), "s" if case.max_ranks() > 1 else "",
            span(list(out["steps"])), res["seconds"]))
        for rx in case.expect_log:
            m = re.search(rx, res.get("last_log", ""), re.M)
            self.tap.test(bool(m), "%s: output of the last run matches /%s/" % (name, rx),
                          [] if m else log_tail(res))
        self.check_reference(case, res)
        if case.twin:
            self.check_twin(case, res)

    def check_reference(self, case, res):
        name, out = case.name, res["out"]
        ref_path = os.path.join(self.args.refdir, name + ".ref")
        if not case.compare:
            return
        if self.args.regenerate:
            try:
                write_reference(ref_path, case, out, build_info(self.args, self.executor.launcher, res))
            except (OSError, KeyError) as e:
                self.tap.test(False, "%s: cannot write the reference %s: %s" % (name, ref_path, e))
                return
            self.tap.test(True, "%s: reference written to %s" % (name, ref_path))
            return
        if not os.path.exists(ref_path):
            self.tap.test(False, "%s vs reference: no file %s" % (name, ref_path),
                          ["create it with: REGENERATE=1 regression/run %s" % name])
            return
        try:
            ref = read_reference(ref_path)
        except (OSError, CaseError) as e:
            self.tap.test(False, "%s vs reference: %s" % (name, e))
            return
        for q in [q for q in QUANTITIES if q in case.compare]:
            tol = case.compare[q]
            ok, summary, table = compare_quantity(q, ref, out, tol, subset=False)
            self.tap.test(ok, "%s vs reference: %-10s %s (%s)" % (name, q, summary, tol.text()), table)

    def check_twin(self, case, res):
        name, twin_name = case.name, case.twin
        twin = self.cases.get(twin_name)
        if twin is None:
            self.tap.test(False, "%s vs twin: no case '%s' in %s" % (name, twin_name, self.args.casedir))
            return
        tres = self.executor.run_case(twin)
        if tres["skip"]:
            self.tap.skip("%s vs twin %s" % (name, twin_name), "the twin is skipped: %s" % tres["skip"])
            return
        if twin.error or not tres["ok"]:
            self.tap.test(False, "%s vs twin %s: the twin's run failed: %s" % (
                name, twin_name, twin.error or tres.get("why")), log_tail(tres))
            return
        out, tout = res["out"], tres["out"]
        self.check_same_problem(case, res, tres)
        for q in [q for q in QUANTITIES if q in case.twin_compare]:
            tol = case.twin_compare[q]
            ok, summary, table = compare_quantity(q, tout, out, tol, subset=True)
            self.tap.test(ok, "%s vs twin %s: %-10s %s (%s)" % (name, twin_name, q, summary, tol.text()), table)
        for cols, op, factor in case.twin_memory:
            self.check_memory(case, out, tout, cols, op, factor)

    def check_same_problem(self, case, res, tres):
        """The decks must pose the same problem: equal apart from layout keys."""
        mine, theirs = parse_deck(res["out"]["deck"]), parse_deck(tres["out"]["deck"])
        allowed = LAYOUT_KEYS + tuple(case.twin_differs)
        diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
        stray = [k for k in diff if not any(fnmatch.fnmatchcase(k, p) for p in allowed)]
        shown = [k for k in diff if not k.startswith("io.")]
        differ = ", ".join("%s (%s vs %s)" % (k, mine.get(k), theirs.get(k)) for k in shown)
        differ = differ.replace(res["dir"], "{dir}").replace(tres["dir"], "{dir}")
        self.tap.test(not stray, "%s vs twin %s: same problem, the decks differ in %s" % (
            case.name, case.twin, differ or "nothing"),
            ["%s differs and is not a layout key; list it under 'twin_differs:' if intended" % k for k in stray])

    def check_memory(self, case, out, tout, cols, op, factor):
        """Rank 0's allocated bytes in cols, against factor times the twin's."""
        label = "%s vs twin %s: memory %s" % (case.name, case.twin, "+".join(cols))
        if "allocated" not in out or "allocated" not in tout:
            self.tap.test(False, "%s: no /memory/allocated in metrics.h5" % label)
            return
        mine = sum(out["allocated"][c] for c in cols)
        theirs = sum(tout["allocated"][c] for c in cols)
        bound = factor * theirs
        ok = mine < bound if op == "<" else mine <= bound
        self.tap.test(ok, "%s: %d bytes on rank 0 %s %g x %d" % (label, mine, op, factor, theirs))
