"""What a crashed run leaves, and who removes it: a run records every ring,
ipc socket file and Slurm rank folder it creates in RUN/resources, so the
next `zeus-pipe up` after its supervisor was SIGKILLed (and its stages with
it) removes exactly those — every rank's ring and every socket, also of
rank 1's folder under Slurm — and nothing else: not a segment or file it did
not record, nor one of another run that a damaged record names."""
import os
import signal
import zp
from test_slurm import task, PORT

CONFIG = """
run: {{name: {name}}}
seed: 3
dataset:
  source: synthetic
  synthetic: {{train_samples: 20000, test_samples: 0, shape: [1, 8, 8], classes: 4, cost_us: {cost}}}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 64, depth: 2}}
trainer:
  backend: cpu
  gpus: {gpus}
  model: {{hidden: [16]}}
  epochs: 1000
  log_every_steps: 5
"""


def kill_all(w, *supervisors):
    """SIGKILL: the supervisors first, then every stage, so that nobody cleans up."""
    for p in supervisors:
        p.kill()
        p.wait()
    for pid in zp.stage_pids(w.path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    zp.wait_for(lambda: not zp.stage_pids(w.path), 10, "every stage to be dead")


def socket_files(run):
    return sorted(f for f in os.listdir(os.path.join(run, "sock")))


def touch(path):
    with open(path, "w") as f:
        f.write("not the run's\n")
    return path


def a_killed_two_rank_run_is_cleaned_up_exactly_by_the_next_up():
    with zp.Workdir() as w:
        cfg = w.write("crash.yaml", CONFIG.format(name="crash", gpus=2, cost=200))
        p = w.start("up", cfg)
        run = w.run_dir("crash")
        rings = [zp.ring_path(run, r) for r in (0, 1)]
        want = ["comm.ipc", "control.ipc", "events.ipc", "fetch.ipc", "ring-0.ipc", "ring-1.ipc",
                "stat.ipc", "work.ipc"]
        zp.wait_for(lambda: all(os.path.exists(r) for r in rings) and socket_files(run) == want and
                    os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 30, "both ranks to train")
        other = os.path.join(w.path, "runs", "other")  # a run the damaged record names
        decoys = [zp.ring_path(run, 7), zp.ring_path(other, 0),  # not recorded; another run's
                  touch(os.path.join(run, "sock", "keep.ipc")), touch(os.path.join(w.path, "outside.ipc"))]
        for d in decoys[:2]:
            touch(d)
        try:
            with open(os.path.join(run, "resources"), "a") as f:  # a damaged record
                f.write("shm /%s\nsock %s\nsock %s/sock/../config.yaml\nrun /\nbogus\n" % (
                    os.path.basename(decoys[1]), decoys[3], run))
            kill_all(w, p)
            zp.check(all(os.path.exists(r) for r in rings), "a SIGKILLed run should leave its rings")
            zp.check(len(socket_files(run)) == 9, "and its sockets: %s" % socket_files(run))
            rc, out, err = w.run("up", cfg, "run.name=next", "trainer.epochs=1", "trainer.gpus=1",
                                 "dataset.synthetic.cost_us=0", "dataset.synthetic.train_samples=500")
            zp.check(rc == 0, "next run: exit %d\n%s" % (rc, err))
            zp.check("cleaning up after %s" % os.path.realpath(run) in err, err)
            left = [r for r in rings if os.path.exists(r)]
            zp.check(not left, "rings left: %s" % left)
            zp.check(socket_files(run) == ["keep.ipc"], "sock/ holds %s" % socket_files(run))
            zp.check(all(os.path.exists(d) for d in decoys), "removed what it did not record: %s" %
                     [d for d in decoys if not os.path.exists(d)])
            zp.check("left alone 5 line(s)" in err, err)
            zp.check(os.path.exists(os.path.join(run, "config.yaml")), "config.yaml removed")
            for f in ("resources", "supervisor.pid"):
                zp.check(not os.path.exists(os.path.join(run, f)), f + " left")
            zp.check(not os.path.exists(zp.ring_path(w.run_dir("next"))), "the next run's ring is left")
        finally:
            for d in decoys[:2]:
                if os.path.exists(d):
                    os.unlink(d)


def killed_slurm_tasks_are_cleaned_up_with_rank_1s_folder():
    with zp.Workdir() as w:
        cfg = w.write("sl.yaml", CONFIG.format(name="sl", gpus=1, cost=1000) +
                      'transport: {bind: "127.0.0.1:%d"}\n' % (PORT + 200))
        r0 = task(w, 0, 2, cfg, job="8181")
        r1 = task(w, 1, 2, cfg, job="8181")
        run = w.run_dir("sl")
        rank1 = os.path.join(run, "rank-1")
        ring0, ring1 = zp.ring_path(run, 0), zp.ring_path(rank1, 1)
        zp.wait_for(lambda: os.path.exists(ring0) and os.path.exists(ring1) and
                    os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 60, "both tasks to train")
        kill_all(w, r0, r1)
        zp.check(os.path.exists(ring1) and "ring-1.ipc" in socket_files(rank1),
                 "rank 1 should have left its ring and sockets: %s" % socket_files(rank1))
        rc, out, err = w.run("up", cfg, "run.name=next", "trainer.epochs=1", "dataset.synthetic.cost_us=0",
                             "dataset.synthetic.train_samples=500")
        zp.check(rc == 0, "next run: exit %d\n%s" % (rc, err))
        zp.check(not os.path.exists(ring0) and not os.path.exists(ring1), "rings left")
        zp.check(socket_files(run) == [] and socket_files(rank1) == [],
                 "sockets left: %s, %s" % (socket_files(run), socket_files(rank1)))
        zp.check(not os.path.exists(os.path.join(rank1, "supervisor.pid")), "rank 1's pid file left")


if __name__ == "__main__":
    zp.main([a_killed_two_rank_run_is_cleaned_up_exactly_by_the_next_up,
             killed_slurm_tasks_are_cleaned_up_with_rank_1s_folder])
