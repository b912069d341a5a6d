#!/usr/bin/python3
"""Rank 0's logger at scale: how many events it takes a second, how many one
rank sends, and so the rank count at which it saturates. Under Slurm every
rank's loaders, prefetch and trainer (and each node's cache) send their
records to rank 0's one logger process, so its capacity bounds the ranks of
one run.

In one run, side by side:
1. One rank's events: the default pipeline (configs/fashion-mnist.yaml,
   the built-in trainer on the CPU, every setting default) run to its end;
   zp-bench-events reads its events.msgpack and counts what a rank r > 0
   would send (all but the logger's own and rank 0's step and epoch_end
   records), per second of the run.
2. The logger's capacity: a real logger (`zeus-pipe up --attach` of the same
   config: every stage but the trainer, idle) is sent RANKS ranks' worth of
   those records (each rank its own stage instances, as under Slurm) as fast
   as its socket takes them; the clock stops when its events.msgpack holds
   the last one. Then `zeus-pipe stat --json` must list every instance sent:
   RANKS x (loaders + prefetch + trainer + cache) rows; and after `zeus-pipe
   down` the logger must have written the report and a whole trace.json of
   all of them (the supervisor gives it time by the size of events.msgpack).
3. libzmq's ceiling: the same messages over tcp with CURVE (how ranks r > 0
   reach rank 0) into a socket that only receives.

Printed: events/s and bytes/s of one rank, of the logger and of CURVE; the
rank count at which the logger saturates (capacity / one rank's rate); the
share of the logger 1,024 ranks would use; and the bytes a second that many
ranks add to events.msgpack.

Run: /usr/bin/python3 bench/logger_bench.py [BUILD_DIR] [--ranks N]
     /usr/bin/python3 bench/logger_bench.py [BUILD_DIR] --quick   (what the test
     suite runs: the default run cut to 1 epoch; the flood and the check of
     `stat` as in a full run; its figures mean little)
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CONFIG = os.path.join(REPO, "configs", "fashion-mnist.yaml")


def env():
    e = dict(os.environ)
    e.pop("OPENBLAS_CORETYPE", None)
    return e


def events(bin_dir, *argv):
    p = subprocess.run([os.path.join(bin_dir, "zp-bench-events")] + [str(a) for a in argv],
                       capture_output=True, text=True, timeout=600)
    if p.returncode:
        sys.exit("zp-bench-events %s failed (exit %d): %s" % (argv[0], p.returncode, p.stderr))
    return json.loads(p.stdout)


def one_rank(zp, d, epochs):
    """The default run's events.msgpack, and the rate of a rank r > 0 in it."""
    argv = [zp, "up", CONFIG, "run.dir=%s/runs" % d, "cache.path=%s/cache" % d]
    if epochs:
        argv.append("trainer.epochs=%d" % epochs)
    p = subprocess.run(argv, capture_output=True, text=True, env=env(), timeout=1200)
    if p.returncode:
        sys.exit("the default run failed (exit %d): %s" % (p.returncode, p.stderr[-2000:]))
    return os.path.join(d, "runs", "fashion-mnist", "events.msgpack")


def idle_logger(zp, d):
    """`up --attach`: every stage but the trainer; its run folder once the
    logger's socket is there."""
    run = os.path.join(d, "runs", "idle")
    proc = subprocess.Popen([zp, "up", "--attach", CONFIG, "run.dir=%s/runs" % d, "run.name=idle",
                             "cache.path=%s/cache" % d], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env(), start_new_session=True)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(run, "sock", "events.ipc")):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            sys.exit("`up --attach` did not start: %s" % proc.stderr.read().decode()[-2000:])
        time.sleep(0.1)
    time.sleep(1)  # every stage's first stats record in
    return proc, run


def stat_rows(zp, run):
    p = subprocess.run([zp, "stat", run, "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode:
        sys.exit("zeus-pipe stat failed: %s" % p.stderr)
    return json.loads(p.stdout)["stages"]


def finished(run, err):
    """What is wrong with the logger's end after the flood ("" when nothing):
    it must have had the time to write the report and a whole trace.json."""
    if "did not stop in time" in err:
        return "the supervisor killed a stage: " + err[-1000:]
    if not os.path.exists(os.path.join(run, "report.txt")):
        return "no report.txt"
    try:
        with open(os.path.join(run, "trace.json")) as f:
            json.load(f)
    except (OSError, ValueError) as e:
        return "trace.json: %s" % e
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build", nargs="?", default="build", metavar="BUILD_DIR",
                    help="the folder with zeus-pipe and zp-bench-events (default build)")
    ap.add_argument("--ranks", type=int, default=1024, help="ranks sent to the logger (default 1024)")
    ap.add_argument("--quick", action="store_true", help="the test suite's short run")
    a = ap.parse_args()
    bin_dir = os.path.abspath(a.build)
    zp = os.path.join(bin_dir, "zeus-pipe")
    d = tempfile.mkdtemp(prefix="zp-logger-bench-")
    proc = None
    try:
        log = one_rank(zp, d, 1 if a.quick else 0)
        rank = events(bin_dir, "rate", log)
        proc, run = idle_logger(zp, d)
        before = stat_rows(zp, run)
        flood = events(bin_dir, "flood", "ipc://%s/sock/events.ipc" % run, log, a.ranks,
                       os.path.join(run, "events.msgpack"))
        after = stat_rows(zp, run)
        # `down`: the logger writes the report and trace of all those records
        subprocess.run([zp, "down", run], capture_output=True, timeout=60)
        _, err = proc.communicate(timeout=300)
        proc = None
        ended = finished(run, err.decode())
        curve = events(bin_dir, "curve", log, a.ranks)
    finally:
        if proc:
            subprocess.run([zp, "down", os.path.join(d, "runs", "idle")], capture_output=True,
                           timeout=60)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        shutil.rmtree(d, ignore_errors=True)

    records = rank["rank"]
    span = rank["span_s"]
    rank_eps, rank_bps = len(records) / span, sum(r[3] for r in records) / span
    kinds = {}
    for stage, kind, _, _ in records:
        kinds["%s/%s" % (stage, kind)] = kinds.get("%s/%s" % (stage, kind), 0) + 1
    cap_eps, cap_bps = flood["events_per_s"], flood["bytes"] / flood["seconds"]
    print("one rank of the default pipeline: %d records in %.1f s of its run (%s)"
          % (len(records), span, ", ".join("%s %d" % kv for kv in sorted(kinds.items()))))
    print("%-52s %10s %12s" % ("", "events/s", "MB/s"))
    print("%-52s %10.1f %12.3f" % ("one rank, default settings", rank_eps, rank_bps / 1e6))
    print("%-52s %10.0f %12.1f" % ("rank 0's logger, %d ranks' records (capacity)" % a.ranks,
                                    cap_eps, cap_bps / 1e6))
    print("%-52s %10.0f %12.1f" % ("libzmq tcp + CURVE into one socket (ceiling)",
                                    curve["events_per_s"], curve["bytes"] / curve["seconds"] / 1e6))
    print("the logger saturates at %.0f ranks (capacity / one rank's rate); 1,024 ranks use %.0f%% "
          "of it and add %.1f MB/s to events.msgpack"
          % (cap_eps / rank_eps, 100 * 1024 * rank_eps / cap_eps, 1024 * rank_bps / 1e6))

    # What could fail: every record handled, and `stat` lists every instance sent.
    ok = flood["done"]
    if not ok:
        print("FAIL: the logger had not written every record after 300 s")
    for stage in sorted({r[0] for r in records if r[1] == "stats"}):
        instances = len({r[2] for r in records if r[0] == stage and r[1] == "stats"})
        own = sum(1 for r in before if r["stage"] == stage)
        listed = sum(1 for r in after if r["stage"] == stage)
        if listed < own + a.ranks * instances:
            print("FAIL: zeus-pipe stat lists %d %s rows after %d ranks' records; want %d"
                  % (listed, stage, a.ranks, own + a.ranks * instances))
            ok = False
    print("zeus-pipe stat after the flood: %d rows%s" % (len(after), "" if ok else " (FAIL)"))
    if ended:
        print("FAIL: after `zeus-pipe down`, %s" % ended)
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
