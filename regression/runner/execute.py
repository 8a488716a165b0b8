"""Running a case: whether it can run here (its skips and needs), its setup
commands and its triad runs in a scratch directory of its own, each with a
timeout and its output in the case's log; every case at most once."""

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

from .launch import Launcher, run_env, shell_words
from .output import read_output
from .quantities import CaseError


def run_logged(argv, log_path, cwd, env, timeout, shell=False):
    """Run a command, output into log_path; -> exit status, or 'timeout'."""
    with open(log_path, "ab") as log:
        log.write(("$ %s\n" % (argv if shell else shell_words(argv))).encode())
        log.flush()
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             cwd=cwd, env=env, shell=shell, start_new_session=True)
        try:
            return p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=10)
                    break
                except subprocess.TimeoutExpired:
                    pass
            return "timeout"


def have_gpu():
    forced = os.environ.get("REGRESSION_GPU")
    if forced in ("0", "1"):
        return forced == "1"
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        p = subprocess.run([exe, "-L"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return p.returncode == 0 and b"GPU" in p.stdout


class Executor:
    """Runs the cases of one invocation under args (the command line's options)."""

    def __init__(self, args):
        self.args = args
        self.results = {}         # case name -> result of its one run
        self.runs = 0             # triad runs started
        self.case_dirs = []       # the scratch directories made
        self.gpu = None           # have_gpu(), asked once
        self.launcher = Launcher(args.triad)
        self.env = run_env()

    def skip_reason(self, case):
        if case.error:
            return None
        if case.skip:
            return case.skip
        if case.max_ranks() > self.args.max_ranks:
            return "needs %d ranks, at most %d allowed (--max-ranks or REGRESSION_MAX_RANKS)" % (
                case.max_ranks(), self.args.max_ranks)
        for need in case.needs:
            w = need.split()
            if w[0] == "gpu":
                if self.gpu is None:
                    self.gpu = have_gpu()
                if not self.gpu:
                    return "needs a GPU, none found (nvidia-smi -L; REGRESSION_GPU=1 overrides)"
            elif w[0] == "program":
                for prog in w[1:]:
                    if not shutil.which(prog):
                        return "needs the program %s, not on PATH" % prog
        return None

    def subst(self, text, case_dir, quote=False):
        q = shlex.quote if quote else (lambda s: s)
        for k, v in (("{dir}", case_dir), ("{cases}", self.args.casedir),
                     ("{top_srcdir}", self.args.top_srcdir), ("{python}", sys.executable)):
            text = text.replace(k, q(v))
        return text

    def run_case(self, case):
        """Run a case once per invocation; -> result dict: case, ok, skip, commands, and
        once it ran: dir, log, why (when not ok), last_log, seconds, out."""
        if case.name in self.results:
            return self.results[case.name]
        res = {"case": case, "ok": False, "skip": self.skip_reason(case), "commands": []}
        self.results[case.name] = res
        if case.error or res["skip"]:
            return res
        case_dir = os.path.join(self.args.workdir, case.name)
        shutil.rmtree(case_dir, ignore_errors=True)
        os.makedirs(case_dir)
        self.case_dirs.append(case_dir)
        res["dir"] = case_dir
        log_path = os.path.join(case_dir, "output.log")
        res["log"] = log_path
        t0 = time.time()
        for cmd in case.setup:
            rc = run_logged(self.subst(cmd, case_dir, quote=True), log_path, self.args.casedir,
                            self.env, case.timeout, shell=True)
            if rc != 0:
                res["why"] = "setup command failed (%s): %s" % (rc, cmd)
                return res
        for k, (ranks, over) in enumerate(case.runs):
            run_dir = self.run_one(case, k, ranks, over, res)
            if run_dir is None:
                return res
        res["seconds"] = time.time() - t0
        try:
            res["out"] = read_output(run_dir, case.wants_final(case.compare) or case.wants_final(case.twin_compare))
        except (OSError, KeyError, CaseError) as e:
            res["why"] = "cannot read the output in %s: %s" % (run_dir, e)
            return res
        res["ok"] = True
        return res

    def run_one(self, case, k, ranks, over, res):
        """Run k of the case, its ranks and deck overrides; -> its run directory, None if it failed."""
        case_dir, log_path = res["dir"], res["log"]
        over = [self.subst(w, case_dir) for w in over]
        if not any(w.lower().startswith("io.run_dir=") for w in over):
            over.insert(0, "io.run_dir='%s'" % os.path.join(case_dir, "run").replace("'", "''"))
        if self.args.hang_timeout > 0 and not any(w.lower().startswith("diag.hang_timeout=") for w in over):
            over.append("diag.hang_timeout=%g" % self.args.hang_timeout)
        run_dir = [w for w in over if w.lower().startswith("io.run_dir=")][-1].split("=", 1)[1].strip("'\"")
        argv = self.launcher.argv(ranks or case.ranks) + [os.path.basename(case.path)] + over
        res["commands"].append(self.describe(argv, case_dir))
        start = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        self.runs += 1
        rc = run_logged(argv, log_path, self.args.casedir, self.env, case.timeout)
        if rc != 0:
            res["why"] = "run %d of %d %s" % (k + 1, len(case.runs),
                                              "timed out after %d s" % case.timeout if rc == "timeout"
                                              else "exited with status %s" % rc)
            return None
        with open(log_path, encoding="utf-8", errors="replace") as f:
            f.seek(start)
            res["last_log"] = f.read()
        return run_dir

    def describe(self, argv, case_dir):
        """The command as one would type it, with the scratch directory as {dir}."""
        return shell_words([a.replace(self.args.triad, "$top_builddir/triad").replace(case_dir, "{dir}")
                            for a in argv])
