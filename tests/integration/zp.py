"""Shared helpers of the integration tests: start real zeus-pipe pipelines in a
temporary folder, read their metrics, and make sure nothing is left behind."""
import glob
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

BIN = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else "build/zeus-pipe"
MASK = (1 << 64) - 1


def mix64(x):
    """splitmix64, as pipeline/base/hash.h."""
    x = (x + 0x9E3779B97F4A7C15) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def index_checksum(indices):
    return "%016x" % (sum(mix64(i) for i in indices) & MASK)


SYNTH = """
run: {{name: {name}}}
seed: 3
dataset:
  source: synthetic
  synthetic: {{train_samples: {train}, test_samples: {test}, shape: [1, 8, 8], classes: 4, cost_us: {cost}}}
loader: {{workers: {workers}, task_size: 16}}
prefetch: {{batch_size: 64, depth: 2}}
trainer:
  backend: cpu
  model: {{hidden: [32]}}
  epochs: {epochs}
  log_every_steps: 5
logger: {{stat_interval_ms: 200}}
"""


def libzmq_only(report):
    """Whether a LeakSanitizer report (its lines, from its ERROR line on) is
    libzmq's own: indirect leaks only (no block of ours, nor a context or
    socket left open, which would be a direct leak), each allocated straight
    from libzmq. libzmq 4.3.4 leaves a few such objects when a signal stops
    a stage mid-teardown (seen in the prefetch at Ctrl-C, rarely); a leak of
    ours still fails."""
    end = next((k for k, l in enumerate(report) if l.startswith("SUMMARY:")), len(report))
    report = report[:end]
    callers = [l for l in report if l.strip().startswith("#1 ")]
    return (any("Indirect leak" in l for l in report) and
            not any("Direct leak" in l for l in report) and
            bool(callers) and all("libzmq" in l for l in callers))


class Workdir:
    """A temporary folder that is removed, with every process still running
    from it killed, when the test ends (pass or fail)."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="zp-it-")
        self.procs = []

    def __enter__(self):
        return self

    def sanitizer_reports(self):
        """AddressSanitizer/UBSan/LeakSanitizer reports in any stage log: each
        report's first line and the 40 lines after it (the stacks), so that a
        rare failure can be read from CI's output."""
        bad = []
        for log in glob.glob(os.path.join(self.path, "**", "logs", "*.log"), recursive=True):
            with open(log, errors="replace") as f:
                lines = f.read().splitlines()
            for i, line in enumerate(lines):
                if "LeakSanitizer" in line and libzmq_only(lines[i:]):
                    sys.stderr.write("%s: a leak inside libzmq alone, not failed: %s\n"
                                     % (os.path.basename(log), line.strip()))
                elif "ERROR: " in line and "Sanitizer" in line or "runtime error:" in line:
                    bad += ["%s: %s" % (os.path.basename(log), l.strip()) for l in lines[i:i + 41]]
        return bad

    def __exit__(self, *exc):
        reports = self.sanitizer_reports()
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        for pid in stage_pids(self.path):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.path, ignore_errors=True)
        if reports and exc[0] is None:
            raise AssertionError("sanitizer reports:\n" + "\n".join(reports[:200]))
        return False

    def write(self, name, text):
        path = os.path.join(self.path, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, *args, prefix=(), **kw):
        """Starts zeus-pipe ARGS in its own process group (like a shell job),
        under the command `prefix` when given (`ip netns exec NS`). A cache
        whose config sets no cache.path goes under this folder, not into the
        user's ~/.cache, unless the caller's env names XDG_CACHE_HOME itself."""
        env = dict(kw.pop("env", None) or os.environ)
        if env.get("XDG_CACHE_HOME") == os.environ.get("XDG_CACHE_HOME"):
            env["XDG_CACHE_HOME"] = os.path.join(self.path, "xdg-cache")
        kw["env"] = env
        p = subprocess.Popen(list(prefix) + [BIN] + list(args), cwd=self.path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)
        self.procs.append(p)
        return p

    def run(self, *args, timeout=240):
        p = self.start(*args)
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def run_dir(self, name):
        return os.path.join(self.path, "runs", name)


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def epoch_ends(run_dir, split):
    return [m for m in metrics(run_dir) if m.get("event") == "epoch_end" and m["split"] == split]


def stage_pids(folder):
    """Live processes whose command line names a run under `folder`."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        # `[WRAPPER] zeus-pipe stage NAME --run DIR ...`: the word itself, not a path containing it
        if "stage" in argv and any(folder in a for a in argv) and state != "Z":
            pids.append(int(d))
    return pids


def order_digest(indices):
    """Order-dependent digest of a sequence of indices, as zp_order_step()."""
    d = 0xCBF29CE484222325
    for i in indices:
        d = ((d ^ mix64(i)) * 0x100000001B3) & MASK
    return "%016x" % d


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


def permutation(seed, split, epoch, n):
    """The sampler's shuffled order of an epoch (pipeline/dataset/sampler.c):
    0..n-1 shuffled (Fisher-Yates) by xoshiro256** seeded as zp_rng_seed()
    with seed ^ mix64(split << 40 ^ epoch); split 0 train, 1 test. A rank r
    of W takes its entries from `from` on: perm[from + r::W]."""
    x, s = (seed ^ mix64((split << 40) ^ epoch)) & MASK, []
    for _ in range(4):
        x = mix64(x)
        s.append(x)

    def below(bound):
        limit = ((1 << 64) - bound) % bound
        while True:
            out, t = (_rotl((s[1] * 5) & MASK, 7) * 9) & MASK, (s[1] << 17) & MASK
            s[2] ^= s[0]
            s[3] ^= s[1]
            s[1] ^= s[2]
            s[0] ^= s[3]
            s[2] ^= t
            s[3] = _rotl(s[3], 45)
            if out >= limit:
                return out % bound

    perm = list(range(n))
    for i in range(n - 1, 0, -1):
        j = below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


def ring_path(run_dir, rank=0):
    """/dev/shm file of a run's ring of `rank`, named as zp_ring_name() does."""
    h = 0xCBF29CE484222325
    for b in os.path.realpath(run_dir).encode():
        h = ((h ^ mix64(b)) * 0x100000001B3) & MASK
    return "/dev/shm/zp-%016x-ring%d" % (h, rank)


def mp_pack(obj):
    """msgpack of a header (a map of str to int or str), by hand: Debian's
    python has no msgpack module."""
    if isinstance(obj, dict):
        out = bytes([0x80 | len(obj)]) if len(obj) < 16 else b"\xde" + struct.pack(">H", len(obj))
        for k, v in obj.items():
            out += mp_pack(k) + mp_pack(v)
        return out
    if isinstance(obj, str):
        b = obj.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else b"\xd9" + bytes([len(b)])) + b
    if isinstance(obj, int) and 0 <= obj < 128:
        return bytes([obj])
    return b"\xcf" + struct.pack(">Q", obj)


def mp_unpack(b):
    """The inverse of mp_pack for what zeus-pipe's headers hold (maps, strings,
    unsigned and signed integers); returns the value."""
    def one(i):
        c = b[i]
        if c < 0x80:
            return c, i + 1
        if c & 0xf0 == 0x80 or c == 0xde:
            n, i = (c & 0x0f, i + 1) if c != 0xde else (struct.unpack(">H", b[i + 1:i + 3])[0], i + 3)
            d = {}
            for _ in range(n):
                k, i = one(i)
                d[k], i = one(i)
            return d, i
        if c & 0xe0 == 0xa0 or c == 0xd9:
            n, i = (c & 0x1f, i + 1) if c != 0xd9 else (b[i + 1], i + 2)
            return b[i:i + n].decode(), i + n
        sizes = {0xcc: (">B", 1), 0xcd: (">H", 2), 0xce: (">I", 4), 0xcf: (">Q", 8),
                 0xd0: (">b", 1), 0xd1: (">h", 2), 0xd2: (">i", 4), 0xd3: (">q", 8)}
        if c in sizes:
            fmt, n = sizes[c]
            return struct.unpack(fmt, b[i + 1:i + 1 + n])[0], i + 1 + n
        if c >= 0xe0:
            return c - 256, i + 1
        raise ValueError("msgpack byte 0x%02x not understood here" % c)
    return one(0)[0]


class Zmtp:
    """A ZeroMQ peer on an ipc endpoint, by hand (ZMTP 3.0, NULL mechanism:
    Debian's python has no zmq module): `kind` DEALER (or another socket type)
    with routing id `identity`. Sends and receives multipart messages."""

    def __init__(self, path, identity=b"", kind=b"DEALER"):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(30)
        self.s.connect(path)
        self.s.sendall(b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32)
        self.buf = b""
        self._take(64)

        def prop(name, value):
            return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
        body = b"\x05READY" + prop(b"Socket-Type", kind) + prop(b"Identity", identity)
        self.s.sendall(b"\x04" + bytes([len(body)]) + body)
        self._frame()  # the peer's READY command

    def _take(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            check(chunk, "the ZeroMQ peer closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self):
        flags = self._take(1)[0]
        n = struct.unpack(">Q", self._take(8))[0] if flags & 2 else self._take(1)[0]
        return flags, self._take(n)

    def send(self, frames):
        for i, f in enumerate(frames):
            more = 1 if i + 1 < len(frames) else 0
            if len(f) < 256:
                self.s.sendall(bytes([more, len(f)]) + f)
            else:
                self.s.sendall(bytes([more | 2]) + struct.pack(">Q", len(f)) + f)

    def recv(self):
        """The next message's frames (commands such as PING are skipped)."""
        frames = []
        while True:
            flags, body = self._frame()
            if flags & 4:
                continue
            frames.append(body)
            if not flags & 1:
                return frames

    def close(self):
        self.s.close()


def sanitizer_env():
    """What Python needs to load a sanitizer build of libzeuspipe.so ({} for
    a normal build): the ASan runtime first in the process, libstdc++ loaded
    with it (torch throws C++ exceptions, and ASan finds the real __cxa_throw
    only in a library present when it starts), and no leak checks (those
    would be Python's own)."""
    lib = os.path.join(os.path.dirname(BIN), "libzeuspipe.so")
    ldd = subprocess.run(["ldd", lib], capture_output=True, text=True).stdout
    asan = [l.split("=>")[1].split()[0] for l in ldd.splitlines() if "libasan" in l and "=>" in l]
    if not asan:
        return {}
    return dict(LD_PRELOAD=asan[0] + ":libstdc++.so.6", ASAN_OPTIONS="detect_leaks=0")


# The zeus_pipe package and the Datasets of the Python-Dataset tests.
PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
PYDATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "pydata"))


def python_env(**extra):
    """The environment of a run whose loaders or program are Python: the
    package on PYTHONPATH and what a sanitizer build needs; `extra` on top
    (ASAN_OPTIONS joined to the sanitizer's own)."""
    env = dict(os.environ, PYTHONPATH=PACKAGE, **sanitizer_env())
    for k, v in extra.items():
        env[k] = env[k] + ":" + v if k == "ASAN_OPTIONS" and env.get(k) else v
    return env


def main_needing(modules, tests):
    """main(tests) where /usr/bin/python3 imports every one of `modules`;
    else says so and exits 77 (ctest's "skipped")."""
    p = subprocess.run([sys.executable, "-c", "import " + ", ".join(modules)], capture_output=True)
    if p.returncode:
        print("SKIP: %s has no %s" % (sys.executable, " or ".join(modules)))
        sys.exit(77)
    main(tests)


def text(path):
    """The file's text, or "" while it does not exist yet (a log a stage is about to open)."""
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def wait_for(pred, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))


def check(cond, msg):
    if not cond:
        raise AssertionError(msg)


def main(tests, exit_code_on_pass=0):
    """Runs every test; exits 1 when one failed, else exit_code_on_pass (77:
    ctest's "skipped", for a test whose subject is missing here)."""
    failed = 0
    for t in tests:
        t0 = time.time()
        try:
            t()
            print("PASS %s (%.1fs)" % (t.__name__, time.time() - t0), flush=True)
        except Exception as e:  # report every test, then fail
            failed += 1
            print("FAIL %s: %s" % (t.__name__, e), flush=True)
            import traceback
            traceback.print_exc()
    sys.exit(1 if failed else exit_code_on_pass)
