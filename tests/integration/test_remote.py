"""Remote loaders over tcp with CURVE, between two network namespaces joined by
a veth pair: the run in one, loaders in the other. A loader whose key is in
transport.allowed_keys delivers samples; one with another key, and a plain tcp
client sending junk, get nothing and inject nothing, and the refusal is logged.
Skipped, saying why, where namespaces cannot be made (they need root)."""
import os
import signal
import subprocess
import time
import zp

CONFIG = """
run: {{name: far}}
seed: 4
dataset:
  source: synthetic
  synthetic: {{train_samples: 3000, test_samples: 300, shape: [1, 8, 8], classes: 4, cost_us: 700}}
transport: {{kind: tcp, bind: "{addr}:{port}", allowed_keys: keys}}
loader: {{workers: 1, task_size: 16, heartbeat_ms: 200}}
prefetch: {{batch_size: 64}}
trainer: {{backend: cpu, model: {{hidden: [16]}}, epochs: 3}}
"""


def sh(*cmd):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


class Namespaces:
    def __init__(self):
        tag = "%d" % (os.getpid() % 100000)
        self.a, self.b = "zpa" + tag, "zpb" + tag
        self.va, self.vb = "zva" + tag, "zvb" + tag
        self.ok, self.why = False, ""

    def __enter__(self):
        steps = [("ip", "netns", "add", self.a), ("ip", "netns", "add", self.b),
                 ("ip", "link", "add", self.va, "type", "veth", "peer", "name", self.vb),
                 ("ip", "link", "set", self.va, "netns", self.a),
                 ("ip", "link", "set", self.vb, "netns", self.b),
                 ("ip", "-n", self.a, "addr", "add", "10.231.0.1/24", "dev", self.va),
                 ("ip", "-n", self.b, "addr", "add", "10.231.0.2/24", "dev", self.vb),
                 ("ip", "-n", self.a, "link", "set", self.va, "up"),
                 ("ip", "-n", self.b, "link", "set", self.vb, "up"),
                 ("ip", "-n", self.a, "link", "set", "lo", "up"),
                 ("ip", "-n", self.b, "link", "set", "lo", "up")]
        for s in steps:
            try:
                r = sh(*s)
            except FileNotFoundError:
                self.why = "no `ip` command (Debian package iproute2)"
                return self
            if r.returncode != 0:
                self.why = "%s: %s" % (" ".join(s), r.stderr.strip())
                return self
        self.ok = True
        return self

    def __exit__(self, *exc):
        sh("ip", "netns", "del", self.a)
        sh("ip", "netns", "del", self.b)
        return False


def start_in(w, ns, *args):
    p = subprocess.Popen(["ip", "netns", "exec", ns, zp.BIN] + list(args), cwd=w.path,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    w.procs.append(p)
    return p


def loaded(err):
    for line in err.splitlines():
        if "stopping: loaded" in line:
            return int(line.split("loaded")[1].split()[0])
    return -1


def a_remote_loader_with_an_allowed_key_delivers_and_others_are_refused():
    with zp.Workdir() as w, Namespaces() as ns:
        if not ns.ok:
            print("SKIP: cannot make network namespaces here: %s" % ns.why)
            return
        os.makedirs(os.path.join(w.path, "keys"))
        for name in ("keys/hostb", "stranger"):
            rc, out, err = w.run("keygen", name)
            zp.check(rc == 0 and os.path.exists(os.path.join(w.path, name + ".pub")), err)
        rc, out, err = w.run("keygen", "stranger")
        zp.check(rc == 1 and "File exists" in err, "keygen must not overwrite: %s" % err)
        cfg = w.write("far.yaml", CONFIG.format(addr="10.231.0.1", port=17600 + os.getpid() % 300))
        port = 17600 + os.getpid() % 300
        up = start_in(w, ns.a, "up", cfg)
        run = w.run_dir("far")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "server.pub")), 20, "the run's server key")
        common = ["loader", "--connect", "10.231.0.1:%d" % port, "--server-key",
                  os.path.join(run, "server.pub")]
        good = start_in(w, ns.b, *common, "--key", "keys/hostb.key", cfg)
        bad = start_in(w, ns.b, *common, "--key", "stranger.key", cfg)
        cache_log = os.path.join(run, "logs", "cache-0.log")
        zp.wait_for(lambda: "remote loaders connect" in zp.text(cache_log),
                    20, "the cache stage to listen on tcp")
        junk = subprocess.run(["ip", "netns", "exec", ns.b, "/usr/bin/python3", "-c",
                               "import socket,time\n"
                               "s=socket.create_connection(('10.231.0.1',%d),timeout=5)\n"
                               "s.sendall(b'\\xff'*10+b'\\x7fjunk'*500)\n"
                               "time.sleep(0.5)\n" % port],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        out, err = up.communicate(timeout=120)
        zp.check(up.returncode == 0, "exit %d\n%s" % (up.returncode, err[-2000:]))
        for p in (good, bad):
            os.killpg(p.pid, signal.SIGTERM)
        g_out, g_err = good.communicate(timeout=20)
        b_out, b_err = bad.communicate(timeout=20)
        zp.check(loaded(g_err) > 0, "the allowed remote loader delivered nothing:\n" + g_err[-1500:])
        zp.check(loaded(b_err) == 0, "the refused loader loaded samples:\n" + b_err[-1500:])
        cache_log = open(cache_log).read()
        zp.check("connected over tcp" in cache_log, cache_log[-2000:])
        zp.check("refused a peer from 10.231.0.2" in cache_log, cache_log[-2000:])
        zp.check(junk.returncode == 0, "the junk client could not even connect: " + junk.stderr)
        for split, n in (("train", 3000), ("test", 300)):
            for e in zp.epoch_ends(run, split):
                zp.check(e["samples"] == n == e["distinct"] and
                         e["index_checksum"] == zp.index_checksum(range(n)), e)


if __name__ == "__main__":
    zp.main([a_remote_loader_with_an_allowed_key_delivers_and_others_are_refused])
