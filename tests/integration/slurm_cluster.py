"""A real Slurm cluster for the tests: Debian's `munge` and `slurm-wlm`
daemons (munged, slurmctld, one slurmd a node) started from a scratch folder
with their own key, slurm.conf, ports, state and logs, so that nothing of the
machine's own configuration is read or touched. Every daemon is started here
in the foreground (-F / -D) and stopped by the PID this module holds, never
by name; a job still running at the end is cancelled first.

One node by default, named as this machine (so that the name resolves); a
`name` of your own that does not resolve tests what a rank does then. With
`nodes` (a netns.Nodes), one slurmd per network namespace, entered with
nsenter (not `ip netns exec`, which remounts /sys without the cgroup tree
slurmd reads), the controller on the bridge's address, munge's socket shared
through the filesystem.

Needs root (slurmd runs jobs as their user) and the packages; `available()`
says why not. Where ZP_REQUIRE_SLURM=1 (CI sets it) a missing cluster is a
failure, not a skip."""
import os
import signal
import socket
import subprocess
import time

DAEMONS = ("/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd")
CLIENTS = ("srun", "sbatch", "sinfo", "squeue", "scontrol", "scancel")


def available():
    """None when a cluster can be started here, else why not."""
    if os.geteuid() != 0:
        return "needs root (slurmd starts jobs as their user)"
    missing = [d for d in DAEMONS if not os.access(d, os.X_OK)]
    missing += [c for c in CLIENTS if not any(os.access(os.path.join(p, c), os.X_OK)
                                               for p in os.environ.get("PATH", "").split(":"))]
    if missing:
        return "no %s (Debian packages slurm-wlm and munge)" % ", ".join(missing)
    return None


def free_ports(n):
    """n TCP ports no one listens on now (the kernel's picks, all held open
    until each is known): two clusters never share one, which would mix
    their daemons up."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def required():
    return os.environ.get("ZP_REQUIRE_SLURM") == "1"


class Cluster:
    """`count` nodes of `cpus` CPUs in folder `path` (created). Use as a
    context manager; env() is the environment for the client commands."""

    def __init__(self, path, count=1, cpus=2, name=None, nodes=None, kill_wait=5, local=None):
        """local: {"/tmp/zp-cache": "DIR-%d"}: in node i's processes the folder
        DIR-i is mounted over /tmp/zp-cache (a mount namespace of slurmd's
        own), a node-local disk at the same path on every node, as a
        cluster's /tmp is."""
        self.path, self.cpus, self.kill_wait, self.nodes = path, cpus, kill_wait, nodes
        self.local = local or {}
        self.made = []
        host = socket.gethostname().split(".")[0]
        if nodes:
            count = nodes.count
        self.names = [name or host] if count == 1 and not nodes else \
            ["%s%d" % (name or "zpn", i) for i in range(count)]
        self.ctl_port, self.d_port = free_ports(2)
        self.conf = os.path.join(path, "slurm.conf")
        self.munge_socket = os.path.join(path, "munge", "munge.socket")
        self.procs = []

    def env(self, **extra):
        env = dict(os.environ, SLURM_CONF=self.conf)
        for k in [k for k in env if k.startswith("SLURM_") and k != "SLURM_CONF"]:
            del env[k]  # a test run inside a job must not pass that job's variables on
        env.update(extra)
        return env

    def _start(self, argv, log, ns=None):
        prefix = ["nsenter", "--net=/run/netns/" + ns] if ns else []
        with open(os.path.join(self.path, "log", log), "w") as out:
            p = subprocess.Popen(prefix + argv, stdout=out, stderr=subprocess.STDOUT,
                                 env=self.env(), start_new_session=True)
        self.procs.append(p)
        return p

    def _write_conf(self):
        ctl = self.nodes.bridge_addr() if self.nodes else "127.0.0.1"
        lines = [
            "ClusterName=zptest",
            "SlurmctldHost=%s(%s)" % (socket.gethostname().split(".")[0], ctl),
            "SlurmctldPort=%d" % self.ctl_port, "SlurmdPort=%d" % self.d_port,
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge",
            # cred_expire: how long a requeued job's old credential stays revoked, and
            # so how long Slurm holds the job before it starts again (default 120 s)
            "AuthInfo=socket=%s,cred_expire=5" % self.munge_socket,
            "StateSaveLocation=%s/state" % self.path,
            "SlurmdSpoolDir=%s/spool/%%n" % self.path,
            "SlurmctldPidFile=%s/slurmctld.pid" % self.path,
            "SlurmdPidFile=%s/slurmd-%%n.pid" % self.path,
            "SlurmctldLogFile=%s/log/slurmctld.log" % self.path,
            "SlurmdLogFile=%s/log/slurmd-%%n.log" % self.path,
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            # sched_interval, bf_interval: a job held after its requeue (cred_expire
            # + 1 s) starts within a second of its hold's end, not at the
            # schedulers' next pass (30 s and more)
            "SchedulerType=sched/backfill", "SchedulerParameters=bf_interval=1,sched_interval=1",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "MpiDefault=none",
            "SwitchType=switch/none", "ReturnToService=2", "MailProg=/bin/true",
            "KillWait=%d" % self.kill_wait, "InactiveLimit=0", "MinJobAge=600",
            "DebugFlags=NO_CONF_HASH", "JobRequeue=1",
            # a node of more CPUs than the machine has (3 tasks on 2 cores) is taken as written
            "SlurmdParameters=config_overrides",
        ]
        for i, name in enumerate(self.names):
            addr = self.nodes.addr(i) if self.nodes else "127.0.0.1"
            lines.append("NodeName=%s NodeAddr=%s CPUs=%d RealMemory=1000 State=UNKNOWN"
                         % (name, addr, self.cpus))
        lines.append("PartitionName=zp Nodes=ALL Default=YES MaxTime=INFINITE State=UP")
        with open(self.conf, "w") as f:
            f.write("\n".join(lines) + "\n")

    def __enter__(self):
        try:
            for d in ("log", "state", "munge") + tuple("spool/" + n for n in self.names):
                os.makedirs(os.path.join(self.path, d), exist_ok=True)
            os.chmod(self.path, 0o755)  # munge's socket must be reachable through it
            key = os.path.join(self.path, "munge", "munge.key")
            with open(key, "wb") as f:
                f.write(os.urandom(1024))
            os.chmod(key, 0o600)
            m = os.path.join(self.path, "munge")
            self._start(["/usr/sbin/munged", "-F", "-f", "--socket=" + self.munge_socket,
                         "--key-file=" + key, "--pid-file=%s/munged.pid" % m,
                         "--seed-file=%s/munged.seed" % m, "--log-file=%s/munged.log" % m],
                        "munged.out")
            self._wait(lambda: os.path.exists(self.munge_socket), 20, "munged's socket")
            self._write_conf()
            self._start(["/usr/sbin/slurmctld", "-D", "-i", "-f", self.conf], "slurmctld.out")
            for i, name in enumerate(self.names):
                argv = ["/usr/sbin/slurmd", "-D", "-N", name, "-f", self.conf]
                if self.local:  # its own mounts: sh binds, then becomes slurmd (the same pid)
                    binds = []
                    for mnt, src in sorted(self.local.items()):
                        os.makedirs(src % i, exist_ok=True)
                        if not os.path.isdir(mnt):
                            os.makedirs(mnt)
                            self.made.append(mnt)  # removed at the end
                        binds.append("mount --bind '%s' '%s'" % (src % i, mnt))
                    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            " && ".join(binds) + ' && exec "$@"', "sh"] + argv
                self._start(argv, "slurmd-%s.out" % name, self.nodes.ns[i] if self.nodes else None)
            self._wait(self.idle, 60, "sinfo to show every node idle")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def idle(self):
        """Whether sinfo shows every node idle."""
        p = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=self.env(),
                           capture_output=True, text=True)
        states = dict(line.split() for line in p.stdout.splitlines() if line.strip())
        return p.returncode == 0 and all(states.get(n) == "idle" for n in self.names)

    def _wait(self, pred, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError("%s exited (%s) while waiting for %s:\n%s"
                                       % (p.args[0], p.returncode, what, self.logs()))
            if pred():
                return
            time.sleep(0.2)
        raise RuntimeError("timed out after %ss waiting for %s:\n%s" % (timeout, what, self.logs()))

    def logs(self, tail=15):
        out = []
        for name in sorted(os.listdir(os.path.join(self.path, "log"))):
            with open(os.path.join(self.path, "log", name), errors="replace") as f:
                out.append("--- %s\n%s" % (name, "".join(f.readlines()[-tail:])))
        return "\n".join(out)

    def __exit__(self, *exc):
        if any(p.poll() is None for p in self.procs[1:]):
            subprocess.run(["scancel", "--full", "--partition=zp"], env=self.env(),
                           capture_output=True)
            end = time.time() + self.kill_wait + 20
            while time.time() < end and self.jobs():
                time.sleep(0.2)
        for p in reversed(self.procs):  # the slurmds, the controller, then munged
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for mnt in self.made:
            try:
                os.rmdir(mnt)
            except OSError:
                pass
        return False

    # ---- the client commands ----------------------------------------------------------

    def run(self, *argv, timeout=300, **kw):
        env = kw.pop("env", None) or self.env()
        return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=timeout,
                              **kw)

    def jobs(self):
        """The ids of the jobs not yet ended."""
        p = self.run("squeue", "-h", "-o", "%A")
        return [l.strip() for l in p.stdout.splitlines() if l.strip()]

    def sbatch(self, script, cwd, *args):
        """Submits the batch script (its text) from cwd; the job id."""
        path = os.path.join(cwd, "job-%d.sh" % len(os.listdir(cwd)))
        with open(path, "w") as f:
            f.write(script)
        p = self.run("sbatch", "--parsable", *args, path, cwd=cwd)
        if p.returncode:
            raise RuntimeError("sbatch: %s" % p.stderr)
        return p.stdout.strip().split(";")[0]

    def job(self, jobid):
        """scontrol's fields of the job, as a dict."""
        p = self.run("scontrol", "-o", "show", "job", jobid)
        fields = {}
        for word in p.stdout.split():
            k, _, v = word.partition("=")
            fields[k] = v
        return fields

    def wait_job(self, jobid, timeout=300, states=("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT",
                                                   "NODE_FAIL", "OUT_OF_MEMORY")):
        end = time.time() + timeout
        while time.time() < end:
            state = self.job(jobid).get("JobState")
            if state in states:
                return state
            time.sleep(0.3)
        raise RuntimeError("job %s still %s after %ss:\n%s"
                           % (jobid, self.job(jobid).get("JobState"), timeout, self.logs()))
