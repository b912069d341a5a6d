#!/usr/bin/python3
"""Soak: a long synthetic run (default 10 minutes) with every stage's resident
memory (VmRSS from /proc/PID/status) sampled every few seconds; prints each
stage's RSS at the start (after the first minute's warm-up, or the first
sample when shorter), at the end, and its maximum, and flags growth beyond
noise. --valgrind instead runs a short pipeline with every stage under
`valgrind --leak-check=full` (through ZP_STAGE_WRAPPER) and prints what each
stage's leak summary says.

Run: /usr/bin/python3 bench/soak.py [BUILD_DIR] [--minutes M] [--every S]
     /usr/bin/python3 bench/soak.py [BUILD_DIR] --valgrind
     /usr/bin/python3 bench/soak.py [BUILD_DIR] --quick   (what the test suite
     runs: 10 seconds, RSS every second; only a run that ends early fails it,
     growth over so short a time is printed but means nothing)
"""
import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

CONFIG = """
run: {name: soak}
seed: 9
dataset:
  source: synthetic
  synthetic: {train_samples: 20000, test_samples: 2000, shape: [1, 28, 28], classes: 10, cost_us: 20}
cache: {enabled: %s, path: soak-cache, max_bytes: 256MiB}
loader: {workers: 2, task_size: 64}
prefetch: {batch_size: 128, depth: 2}
trainer: {backend: cpu, model: {hidden: [128]}, epochs: %d,
          checkpoint: {every_epochs: 1, keep: last}}
logger: {stat_interval_ms: 1000}
"""


def stages(run_dir):
    """{'loader[0]': pid, ...} of the live stage processes of run_dir."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            args = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"stage" in args and run_dir.encode() in args:
            i = args.index(b"stage")
            name = args[i + 1].decode()
            inst = args[args.index(b"--instance") + 1].decode() if b"--instance" in args else "0"
            out["%s[%s]" % (name, inst)] = int(d)
    return out


def rss_kib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def soak(binp, minutes, every):
    """0 when every stage's RSS stayed flat, 1 when one grew, 2 when the run
    ended early."""
    with tempfile.TemporaryDirectory(prefix="zp-soak-") as d:
        cfg = os.path.join(d, "soak.yaml")
        open(cfg, "w").write(CONFIG % ("true", 100000))
        p = subprocess.Popen([binp, "up", cfg], cwd=d, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        run = os.path.realpath(os.path.join(d, "runs", "soak"))
        end = time.time() + 60 * minutes
        samples = {}  # stage -> [(t, kib)]
        t0 = time.time()
        while time.time() < end and p.poll() is None:
            for name, pid in stages(run).items():
                kib = rss_kib(pid)
                if kib is not None:
                    samples.setdefault(name, []).append((time.time() - t0, kib, pid))
            time.sleep(every)
        alive = p.poll() is None
        subprocess.run([binp, "down", run], cwd=d, stdout=subprocess.DEVNULL)
        p.wait(timeout=30)
        if not alive:
            print("the run ended early (exit %s):\n%s" % (p.returncode, p.stderr.read()[-2000:]))
            return 2
        warm = 60 if minutes > 2 else 0
        print("soak: %.1f minutes, RSS every %.0f s (start = first sample after %d s)" %
              (minutes, every, warm))
        print("%-12s %10s %10s %10s %8s" % ("stage", "start MiB", "end MiB", "max MiB", "growth"))
        bad = 0
        for name in sorted(samples):
            s = samples[name]
            pids = {x[2] for x in s}
            start = next((x for x in s if x[0] >= warm), s[0])[1]
            endv, top = s[-1][1], max(x[1] for x in s)
            growth = (endv - start) / start if start else 0
            flat = endv - start < max(2048, 0.05 * start)  # 2 MiB or 5%: noise
            bad += not flat
            print("%-12s %10.1f %10.1f %10.1f %7.1f%%%s%s" % (
                name, start / 1024, endv / 1024, top / 1024, 100 * growth,
                "" if flat else "  <- grows", "" if len(pids) == 1 else "  (restarted)"))
        print("verdict: %s" % ("flat" if not bad else "%d stage(s) grew" % bad))
        return 1 if bad else 0


def valgrind(binp):
    with tempfile.TemporaryDirectory(prefix="zp-vg-") as d:
        cfg = os.path.join(d, "vg.yaml")
        open(cfg, "w").write((CONFIG % ("true", 2)).replace("train_samples: 20000", "train_samples: 2000")
                             .replace("test_samples: 2000", "test_samples: 300"))
        env = dict(os.environ, ZP_STAGE_WRAPPER="valgrind --leak-check=full --show-leak-kinds=definite,indirect "
                   "--errors-for-leak-kinds=definite --error-exitcode=99")
        p = subprocess.run([binp, "up", cfg], cwd=d, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True, timeout=900)
        print("valgrind run: exit %d" % p.returncode)
        bad = p.returncode != 0
        for log in sorted(glob.glob(os.path.join(d, "runs", "*", "logs", "*.log"))):
            text = open(log, errors="replace").read()
            errs = re.findall(r"ERROR SUMMARY: (\d+) errors", text)
            lost = re.findall(r"definitely lost: ([\d,]+) bytes", text)
            ind = re.findall(r"indirectly lost: ([\d,]+) bytes", text)
            print("  %-14s errors %s, definitely lost %s B, indirectly lost %s B" % (
                os.path.basename(log)[:-4], errs[-1] if errs else "?", lost[-1] if lost else "0",
                ind[-1] if ind else "0"))
            bad |= bool(errs and errs[-1] != "0") or bool(lost and lost[-1] != "0")
        print("verdict: %s" % ("clean" if not bad else "NOT clean"))
        if bad:
            print(p.stderr[-3000:])
        return 1 if bad else 0


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build", metavar="BUILD_DIR",
                    help="the build directory of zeus-pipe (default: %(default)s)")
    ap.add_argument("--valgrind", action="store_true",
                    help="instead: a short run with every stage under valgrind")
    ap.add_argument("--quick", action="store_true",
                    help="the test suite's run: 10 seconds, RSS every second")
    ap.add_argument("--minutes", type=float, default=10.0, metavar="M",
                    help="minutes the soak runs (default: %(default)s)")
    ap.add_argument("--every", type=float, default=5.0, metavar="S",
                    help="seconds between RSS samples (default: %(default)s)")
    return ap.parse_args()


def main():
    args = parse_args()
    binp = os.path.abspath(os.path.join(args.build, "zeus-pipe"))
    if args.valgrind:
        return valgrind(binp)
    if args.quick:
        return 1 if soak(binp, 10 / 60, 1.0) == 2 else 0
    return min(soak(binp, args.minutes, args.every), 1)


if __name__ == "__main__":
    sys.exit(main())
