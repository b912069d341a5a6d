"""Nodes on one machine: each a network namespace with its own address, joined
through a bridge in the root namespace by a veth pair, each link limited with
`tc` (a token bucket). Every byte a node sends or receives crosses its veth,
so the host side's interface counters are what the node's link carried.

Used by test_nodes.py and bench/nodes_bench.py to run Slurm-like tasks on
"nodes" that share the filesystem (as a cluster's shared run.dir) but not the
network. Needs root and iproute2; `Nodes.available()` says why not."""
import os
import subprocess


def _ip(*args, ns=None, check=True):
    cmd = ["ip"] + (["-n", ns] if ns else []) + list(args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode:
        raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))
    return p


class Nodes:
    """`count` nodes, addresses 10.<a>.<b>.1.., each link `rate` (tc syntax,
    e.g. "1gbit"; None: unlimited); with host, the machine itself at .254. Use as a context manager: everything it
    made is removed at the end, also after a failure."""

    def __init__(self, count, rate="1gbit", host=False):
        tag = os.getpid() % 100000
        self.prefix = "zp%d" % tag  # interface names: at most 15 bytes
        self.subnet = "10.%d.%d" % (200 + tag % 50, (tag // 50) % 250)
        self.count, self.rate = count, rate
        self.ns = ["%sn%d" % (self.prefix, i) for i in range(count)]
        self.veth = ["%sv%d" % (self.prefix, i) for i in range(count)]
        self.bridge = self.prefix + "br"
        self.host = host  # the root namespace has an address on the bridge (bridge_addr)

    @staticmethod
    def available():
        """None when namespaces can be made here, else why not."""
        if os.geteuid() != 0:
            return "needs root (ip netns)"
        try:
            with Nodes(1):  # a namespace, a bridge, a veth pair and tc's token bucket
                pass
        except FileNotFoundError:
            return "no `ip` or `tc` (Debian package iproute2)"
        except RuntimeError as e:
            return str(e)
        return None

    def addr(self, i):
        return "%s.%d" % (self.subnet, i + 1)

    def bridge_addr(self):
        """The root namespace's address on the bridge (with host=True): where
        the nodes reach a daemon of the machine itself (a Slurm controller)."""
        return "%s.254" % self.subnet

    def __enter__(self):
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("link", "set", self.bridge, "up")
            if self.host:
                _ip("addr", "add", self.bridge_addr() + "/24", "dev", self.bridge)
            for i, (ns, veth) in enumerate(zip(self.ns, self.veth)):
                _ip("netns", "add", ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge, "up")
                _ip("addr", "add", self.addr(i) + "/24", "dev", "eth0", ns=ns)
                _ip("link", "set", "eth0", "up", ns=ns)
                _ip("link", "set", "lo", "up", ns=ns)
                if self.rate:
                    tbf = ["qdisc", "add", "dev", "%s", "root", "tbf", "rate", self.rate,
                           "burst", "256kb", "latency", "100ms"]
                    self._tc([a if a != "%s" else veth for a in tbf])
                    self._tc([a if a != "%s" else "eth0" for a in tbf], ns)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    @staticmethod
    def _tc(args, ns=None):
        cmd = (["ip", "netns", "exec", ns] if ns else []) + ["tc"] + args
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode:
            raise RuntimeError("%s: %s" % (" ".join(cmd), p.stderr.strip()))

    def __exit__(self, *exc):
        for ns in self.ns:
            _ip("netns", "del", ns, check=False)  # its end of the veth goes with it
        for veth in self.veth:
            _ip("link", "del", veth, check=False)
        _ip("link", "del", self.bridge, check=False)

    def wrap(self, i, argv):
        """argv run in node i's namespace."""
        return ["ip", "netns", "exec", self.ns[i]] + list(argv)

    def link_bytes(self, i):
        """Bytes node i's link carried both ways so far (the host side's counters)."""
        total = 0
        for what in ("rx_bytes", "tx_bytes"):
            with open("/sys/class/net/%s/statistics/%s" % (self.veth[i], what)) as f:
                total += int(f.read())
        return total

    def slurm_env(self, rank, ntasks, node, local, job="4242"):
        """The variables srun sets for task `rank` on node `node`."""
        return {"SLURM_PROCID": str(rank), "SLURM_NTASKS": str(ntasks), "SLURM_LOCALID": str(local),
                "SLURM_NODELIST": ",".join(self.addr(i) for i in range(self.count)),
                "SLURMD_NODENAME": self.addr(node), "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0",
                "SLURM_NNODES": str(self.count)}
