"""The command line of a triad run under the launcher (MPIEXEC: mpirun, srun,
...), the environment every run gets, and commands written as shell lines."""

import os
import re
import shlex
import subprocess


class Launcher:
    def __init__(self, triad):
        self.triad = triad
        self.base = shlex.split(os.environ.get("MPIEXEC") or "mpirun")
        self.prog = os.path.basename(self.base[0])
        self.version = self._version()
        self.openmpi = "Open MPI" in self.version or "OpenRTE" in self.version

    def _version(self):
        cmd = [self.base[0], "--version"]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=30)
            text = p.stdout.decode(errors="replace").strip().splitlines()
            return text[0] if text else self.prog
        except (OSError, subprocess.TimeoutExpired):
            return ""

    def argv(self, ranks):
        extra = ["-n", str(ranks)]
        if self.prog != "srun" and self.openmpi:
            extra.append("--oversubscribe")
        return self.base + extra + [self.triad]


def run_env():
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    env.setdefault("OMPI_MCA_hwloc_base_binding_policy", "none")
    # (a rank's non-zero status: no kill sequence of 2 x 1 s over the exited ranks; regression/lib.sh)
    env.setdefault("OMPI_MCA_odls_base_sigkill_timeout", "0")
    # (a local mpirun: ob1 named, the layer Open MPI picks on one node, without first trying the
    # fabrics', 0.2 s a launch; not under Slurm or srun, where a job may span nodes; regression/lib.sh)
    if "SLURM_JOB_ID" not in env and not (env.get("MPIEXEC") or "mpirun").startswith("srun"):
        env.setdefault("OMPI_MCA_pml", "ob1")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def shell_words(argv):
    """argv as a shell line, quoted for reading: io.run_dir="'/x'" rather than shlex's."""
    words = []
    for a in argv:
        if re.fullmatch(r"[\w@%+=:,./{}$-]+", a):
            words.append(a)
        elif not re.search(r'["$`\\!]', a):
            words.append('"%s"' % a)
        else:
            words.append(shlex.quote(a))
    return " ".join(words)
