"""The LMDB cache among other processes: reader slots left by SIGKILLed
readers are freed (mdb_reader_check), so a run still hits; a reader table
full of live readers is an LMDB error on the prefetch's hit path that
`stat --json` counts (lmdb_errors) and the log names, and caching comes back
when slots free; a map another process grew (MDB_MAP_RESIZED) is adopted and
caching goes on."""
import json
import os
import signal
import subprocess
import sys
import lmdb
import zp
from test_cache import cache_events, config, up

# Takes every free reader slot with read transactions (py-lmdb: one slot each),
# says how many, and holds them until killed.
FILL = """
import lmdb, sys, time
env = lmdb.open(sys.argv[1], readonly=True, max_dbs=8)
held = []
try:
    while True:
        held.append(env.begin())
except lmdb.ReadersFullError:
    pass
print(len(held), flush=True)
time.sleep(600)
"""

# Another process grows the map past the cache stage's (64 MiB) and fills it beyond.
GROW = """
import lmdb, sys
env = lmdb.open(sys.argv[1], map_size=64 << 20, max_dbs=8)
db = env.open_db(b"filler")
with env.begin(write=True) as txn:
    txn.put(b"filler", bytes(16 << 20), db=db)
print(env.info()["map_size"], flush=True)
"""


def fill_readers(store):
    p = subprocess.Popen([sys.executable, "-c", FILL, store], stdout=subprocess.PIPE, text=True)
    n = int(p.stdout.readline())
    zp.check(n > 0, "no reader slot was free")
    return p, n


def logs(run):
    return "".join(open(os.path.join(run, "logs", f)).read() for f in sorted(os.listdir(os.path.join(run, "logs"))))


def all_hits(run, split, n, epochs):
    return [(e["hits"], e["misses"]) for e in cache_events(run, split)][-epochs:] == [(n, 0)] * epochs


def stale_reader_slots_of_killed_processes_are_freed_and_the_run_hits():
    with zp.Workdir() as w:
        store = os.path.join(w.path, "cache")
        up(w, config(w, "warm", epochs=1))
        # a process that keeps the environment open (as a long-lived writer or
        # reader does): the reader table is not reset by a first opener
        holder = lmdb.open(store, readonly=True, max_dbs=8)
        try:
            filler, n = fill_readers(store)
            filler.kill()  # its slots stay taken, by a dead pid
            filler.wait()
            try:
                holder.begin().abort()
                zp.check(False, "the reader table should be full of dead readers")
            except lmdb.ReadersFullError:
                pass
            out, err = up(w, config(w, "again", epochs=2))
            run = w.run_dir("again")
            for split, total in (("train", 3000), ("test", 500)):
                zp.check(all_hits(run, split, total, 2), "%s: %s" % (split, cache_events(run, split)))
            zp.check("freed %d reader slot(s) of dead processes" % n in err + logs(run), err + logs(run)[-2000:])
        finally:
            holder.close()


def prefetch_lmdb_errors(w, run):
    rc, out, err = w.run("stat", run, "--json", timeout=10)
    if rc:
        return 0
    return sum(s.get("lmdb_errors", 0) for s in json.loads(out)["stages"] if s["stage"] == "prefetch")


def a_reader_table_full_of_live_readers_is_counted_in_stat_and_caching_comes_back():
    with zp.Workdir() as w:
        store = os.path.join(w.path, "cache")
        up(w, config(w, "warm", epochs=1))
        filler, n = fill_readers(store)  # alive: nobody may free its slots
        try:
            p = w.start("up", config(w, "busy", epochs=30, cost=300))
            run = w.run_dir("busy")
            zp.wait_for(lambda: prefetch_lmdb_errors(w, run) >= 1, 60, "stat --json to count an LMDB error")
        finally:
            filler.send_signal(signal.SIGKILL)  # the slots are a dead process's now: freed at the next try
            filler.wait()
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d\n%s" % (p.returncode, err[-3000:]))
        text = logs(run)
        zp.check("every reader slot is taken by a live process" in text and "MDB_READERS_FULL" in text, text[-3000:])
        zp.check("reading hits from the cache again" in text, text[-3000:])
        for split, total in (("train", 3000), ("test", 500)):
            zp.check(all_hits(run, split, total, 3), "%s: %s" % (split, cache_events(run, split)))
            for e in zp.epoch_ends(run, split):
                zp.check(e["samples"] == e["distinct"] == total, "coverage: %s" % e)
        final = [json.loads(l) for l in open(os.path.join(run, "stats.jsonl"))]
        final = [r for r in final if r.get("stage") == "prefetch" and r.get("final")]
        zp.check(final and final[-1]["lmdb_errors"] >= 1, "stats.jsonl: %s" % final[-1:])


def a_map_grown_by_another_process_is_adopted_and_caching_goes_on():
    with zp.Workdir() as w:
        store = os.path.join(w.path, "cache")
        cfg = config(w, "grown", epochs=3, cost=2000, max_bytes="8MiB")
        p = w.start("up", cfg)
        run = w.run_dir("grown")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 30, "epoch 1 to start")
        grow = subprocess.run([sys.executable, "-c", GROW, store], capture_output=True, text=True, timeout=60)
        zp.check(grow.returncode == 0 and int(grow.stdout) == 64 << 20, grow.stdout + grow.stderr)
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "exit %d\n%s" % (p.returncode, err[-3000:]))
        text = logs(run)
        zp.check("caching stops" not in out + err + text, (out + text)[-3000:])
        zp.check("the map was grown by another process; now 64 MiB" in text, text[-3000:])
        for split, total in (("train", 3000), ("test", 500)):
            zp.check(all_hits(run, split, total, 2), "%s: %s" % (split, cache_events(run, split)))


if __name__ == "__main__":
    zp.main([stale_reader_slots_of_killed_processes_are_freed_and_the_run_hits,
             a_reader_table_full_of_live_readers_is_counted_in_stat_and_caching_comes_back,
             a_map_grown_by_another_process_is_adopted_and_caching_goes_on])
