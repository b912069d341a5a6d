"""The supervisor's contract on real processes: `stat --json` sees every stage
at work (and `stat --watch` draws each one's recent throughput), `down` stops a run, Ctrl-C and SIGTERM stop every stage (a
stage that ignores TERM is killed) leaving no process and no shared memory, a dead stage (not a loader: those
are restarted, see test_faults.py) stops the run with its name and status, and a bad config or dataset starts no process."""
import json
import os
import signal
import subprocess
import zp


def long_run(w, name, workers=2):
    cfg = w.write(name + ".yaml", zp.SYNTH.format(name=name, train=20000, test=0, cost=20,
                                                   workers=workers, epochs=1000))
    p = w.start("up", cfg)
    run = w.run_dir(name)
    zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                any(m.get("event") == "step" for m in zp.metrics(run)), 30, "training to start")
    return p, run


def stage_lines(folder):
    """The stage processes' command lines, for a failure message."""
    lines = []
    for pid in zp.stage_pids(folder):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                lines.append("%d: %s" % (pid, f.read().replace(b"\0", b" ").decode(errors="replace")))
        except OSError:
            pass
    return lines


def stat_json_lists_every_stage_with_nonzero_throughput_and_down_stops_the_run():
    with zp.Workdir() as w:
        p, run = long_run(w, "stat")

        def busy_stages():
            rc, out, err = w.run("stat", run, "--json", timeout=10)
            zp.check(rc == 0, "stat exit %d: %s" % (rc, err))
            doc = json.loads(out)
            moving = {(s["stage"], s["instance"]) for s in doc["stages"] if s["items_per_s"] > 0}
            want = {("loader", 0), ("loader", 1), ("cache", 0), ("prefetch", 0), ("trainer", 0),
                    ("logger", 0)}
            return want <= moving and doc

        doc = zp.wait_for(busy_stages, 20, "every stage to report throughput")
        for s in doc["stages"]:
            for key in ("bytes_per_s", "busy", "wait_in", "wait_out", "queue"):
                zp.check(key in s, "stat --json lacks %s" % key)
            zp.check(0 <= s["busy"] <= 1.05, "busy %r out of range" % s["busy"])
            # the prefetch's readers (none with the cache off, as here: -1); the others have none
            if s["stage"] == "prefetch":
                zp.check(s["readers_busy"] == -1 or 0 <= s["readers_busy"] <= 1.05,
                         "readers_busy %r" % s["readers_busy"])
            else:
                zp.check(s["readers_busy"] == -1, "%s has readers_busy %r" % (s["stage"], s["readers_busy"]))
        rc, out, err = w.run("stat", "stat", timeout=10)  # by name, from the folder holding runs/
        zp.check(rc == 0 and "STAGE" in out and "trainer" in out, "table:\n" + out + err)
        # --watch: each row gains a sparkline of its items/s, a block per refresh seen
        try:
            out = subprocess.run([zp.BIN, "stat", run, "--watch", "0.2"], capture_output=True,
                                 text=True, timeout=4).stdout
        except subprocess.TimeoutExpired as e:  # it watches until stopped
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        tables = [t for t in out.split("\n\n") if "STAGE" in t]
        loader = [next((l for l in t.splitlines() if l.startswith("loader ")), "") for t in tables]
        blocks = [sum(l.count(c) for c in "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588")
                  for l in loader]
        zp.check(len(blocks) >= 3 and blocks[0] == 0 and blocks[-1] >= 2 and
                 blocks == sorted(blocks), "loader rows' sparkline blocks %s:\n%s" % (blocks, out[-2000:]))
        rc, out, err = w.run("down", timeout=20)  # the only running run
        zp.check(rc == 0, "down exit %d: %s" % (rc, err))
        zp.check(p.wait(timeout=10) == 3, "supervisor exit %r after down" % p.returncode)
        zp.check(not zp.stage_pids(w.path), "stages outlived down")


def ctrl_c_and_sigterm_stop_every_stage_and_leave_nothing_behind():
    for sig, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        with zp.Workdir() as w:
            p, run = long_run(w, "sig%d" % sig)
            # six stages; a sanitizer build's helper tasks (LeakSanitizer's tracer is a clone of
            # its stage, with the same command line) come and go, so the count is awaited
            try:
                zp.wait_for(lambda: len(zp.stage_pids(w.path)) == 6, 10, "6 stage processes")
            except AssertionError:
                zp.check(False, "expected 6 stage processes, have:\n" + "\n".join(stage_lines(w.path)))
            ring = zp.ring_path(run)
            zp.check(os.path.exists(ring), "the ring %s is not in /dev/shm" % ring)
            if sig == signal.SIGINT:
                os.killpg(p.pid, sig)  # what a terminal's Ctrl-C does
            else:
                p.send_signal(sig)
            out, err = p.communicate(timeout=60)  # a guard against a hang only
            zp.check(p.returncode == status, "exit %d after signal %d, want %d" % (p.returncode, sig, status))
            zp.check(not zp.stage_pids(w.path), "stage processes left: %s" % zp.stage_pids(w.path))
            zp.check(not os.path.exists(ring), "shared memory left: " + ring)
            zp.check(not os.path.exists(os.path.join(run, "supervisor.pid")), "pid file left")
            zp.check(not [f for f in os.listdir(os.path.join(run, "sock"))], "socket files left")


def a_stage_that_ignores_sigterm_is_killed_and_nothing_is_left():
    with zp.Workdir() as w:
        p, run = long_run(w, "stuck", workers=1)
        loader = [pid for pid in zp.stage_pids(w.path)
                  if b"loader" in open("/proc/%d/cmdline" % pid, "rb").read()][0]
        os.kill(loader, signal.SIGSTOP)  # cannot act on TERM
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)  # a guard against a hang only
        zp.check(p.returncode == 143, "exit %d, want 143" % p.returncode)
        zp.check("loader[0] did not stop in time; killing it" in err, "no kill reported:\n" + err)
        zp.check(not zp.stage_pids(w.path), "stages left: %s" % zp.stage_pids(w.path))
        zp.check(not os.path.exists(zp.ring_path(run)), "shared memory left behind")


def a_killed_prefetch_stops_the_run_naming_the_stage_and_signal():
    with zp.Workdir() as w:
        p, run = long_run(w, "dead", workers=1)
        pf = [pid for pid in zp.stage_pids(w.path)
              if b"prefetch" in open("/proc/%d/cmdline" % pid, "rb").read()]
        zp.check(len(pf) == 1, "one prefetch expected, found %s" % pf)
        os.kill(pf[0], signal.SIGKILL)
        out, err = p.communicate(timeout=15)
        zp.check(p.returncode == 1, "exit %d, want 1" % p.returncode)
        zp.check("prefetch[0] was killed by signal 9" in err and "stopping the run" in err, "stderr:\n" + err)
        zp.check(not zp.stage_pids(w.path), "stages left behind")
        zp.check(not os.path.exists(zp.ring_path(run)), "shared memory left behind")


def stages_die_with_a_killed_supervisor_and_the_next_up_cleans_its_shared_memory():
    with zp.Workdir() as w:
        p, run = long_run(w, "orphan")
        p.kill()  # SIGKILL: the supervisor cannot clean up
        p.wait()
        zp.wait_for(lambda: not zp.stage_pids(w.path), 5, "the stages to die with their supervisor")
        ring = zp.ring_path(run)
        zp.check(os.path.exists(ring), "the dead run's ring %s should still be there" % ring)
        rc, out, err = w.run("up", "orphan.yaml", "trainer.epochs=1", "run.name=next")
        zp.check(rc == 0, "next run: exit %d\n%s" % (rc, err))
        zp.check("cleaning up after" in err, err)
        zp.check(not os.path.exists(ring), "shared memory left: " + ring)
        zp.check(not os.path.exists(zp.ring_path(w.run_dir("next"))), "the next run's ring is left")


def a_bad_config_or_dataset_starts_no_process():
    with zp.Workdir() as w:
        bad = w.write("bad.yaml", "dataset:\n  source: synthetic\nloader:\n  workers: 0\n")
        rc, out, err = w.run("up", "bad.yaml")
        zp.check(rc == 2, "exit %d, want 2" % rc)
        zp.check(err.startswith("bad.yaml:4:12: loader.workers: must be 1..256 (got 0)"), err)
        zp.check(not os.path.exists(os.path.join(w.path, "runs")), "a run directory was created")
        # an IDX file with a bad magic number: reported by path, nothing started
        data = os.path.join(w.path, "data")
        os.mkdir(data)
        for f in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                  "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"):
            with open(os.path.join(data, f), "wb") as fh:
                fh.write(b"\x00\x00\x09\x03" + b"\x00" * 64)
        cfg = w.write("idx.yaml", "dataset:\n  source: idx\n  path: %s\n" % data)
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2, "exit %d, want 2" % rc)
        zp.check("train-images-idx3-ubyte.gz: bad magic number 0x00000903" in err, err)
        zp.check(not os.path.exists(os.path.join(w.path, "runs")), "a run directory was created")
        zp.check(not zp.stage_pids(w.path), "a stage was started")


if __name__ == "__main__":
    zp.main([stat_json_lists_every_stage_with_nonzero_throughput_and_down_stops_the_run,
             ctrl_c_and_sigterm_stop_every_stage_and_leave_nothing_behind,
             a_killed_prefetch_stops_the_run_naming_the_stage_and_signal,
             a_stage_that_ignores_sigterm_is_killed_and_nothing_is_left,
             stages_die_with_a_killed_supervisor_and_the_next_up_cleans_its_shared_memory,
             a_bad_config_or_dataset_starts_no_process])
