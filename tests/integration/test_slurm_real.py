"""On a real Slurm: munged, slurmctld and slurmd of Debian 12 started by the
test (slurm_cluster.py) and zeus-pipe started by `srun` and `sbatch`, where
test_slurm.py and test_nodes.py set srun's variables by hand.

Two tasks under srun train exactly as one trainer of both batches, each
epoch proving every sample once; `srun --ntasks-per-node=1 zeus-pipe warm`
fills the node's cache. A node whose name does not resolve is reached at the
address rank 0 announces; a rank that can reach rank 0 neither way says so,
naming the host and port, in seconds (not after trainer.comm_timeout_s).
`scancel` mid-epoch ends every process of the job and leaves no ring in
/dev/shm and no socket file in the run's folders, also when a loader hangs
in a Dataset's __getitem__. The docs' batch script runs on two nodes (a
slurmd per network namespace, each node's own /tmp/zp-cache). SIGUSR1
saves (the built-in trainer, a DDP program through stop_requested()), and
`srun zeus-pipe up --resume` or, with slurm.requeue, the requeued job goes
on with exactly the batches of an uninterrupted job.

Skips (77) where no cluster can be started (not root, no packages), except
where ZP_REQUIRE_SLURM=1 (CI): there that is a failure. The sanitizer
build runs the cases whose time is zeus-pipe's, not Slurm's (see main)."""
import os
import subprocess
import sys
import time
import zp
import slurm_cluster
from test_ranks import CONFIG, same_training
from test_slurm import stats_of

PORT = 21000 + (os.getpid() % 400) * 4


def config(w, name, batch, epochs=2, cost=0, train=1025, cache="true"):
    text = CONFIG.format(name=name, gpus=1, batch=batch, train=train, corrupt=0, epochs=epochs,
                         cost=cost)
    text += 'transport: {bind: "0.0.0.0:%d"}\ncache: {enabled: %s, path: %s/cache-%s}\n' % (
        PORT, cache, w.path, name)
    return w.write(name + ".yaml", text)


def srun(c, w, ntasks, argv, timeout=300):
    return c.run("srun", "--quiet", "-n", str(ntasks), "--kill-on-bad-exit=1", *argv,
                 cwd=w.path, timeout=timeout)


def each_epoch_once(run, n_train=1025, epochs=2):
    for split, n in (("train", n_train), ("test", 200)):
        ends = zp.epoch_ends(run, split)
        zp.check(len(ends) == epochs and all(e["samples"] == e["distinct"] == n for e in ends),
                 "%s: %r" % (split, ends))


def socket_files(run):
    folder = os.path.join(run, "sock")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def processes_of(folder):
    """Pids whose command line names `folder` (a run's stages, its supervisors)."""
    pids = []
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            argv = open("/proc/%d/cmdline" % pid, "rb").read().decode(errors="replace")
        except OSError:
            continue
        if folder in argv and pid != os.getpid():
            pids.append(pid)
    return pids


def cancel_leaves_nothing(c, job, runs, folders):
    """scancel of a running job: it ends CANCELLED, every process of the runs
    in `runs` is gone within KillWait (Slurm's bound; 5 s here) and a margin,
    and rank r's folders[r] keeps neither its ring in /dev/shm nor a socket
    file (so they ended by their handlers, not by Slurm's SIGKILL)."""
    zp.check(c.run("scancel", job).returncode == 0, "scancel")
    zp.check(c.wait_job(job, 60) == "CANCELLED", c.job(job))
    zp.wait_for(lambda: not processes_of(runs), c.kill_wait + 10, "the job's processes to end")
    for r, folder in enumerate(folders):
        zp.check(not os.path.exists(zp.ring_path(folder, r)), "rank %d's ring is left" % r)
        zp.check(socket_files(folder) == [], "socket files left: %s" % socket_files(folder))


def srun_trains_two_ranks_as_one_trainer_and_warms_the_node():
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        rc, out, err = w.run("up", config(w, "one", 64))
        zp.check(rc == 0, err)
        p = srun(c, w, 2, [zp.BIN, "up", config(w, "two", 32)])
        zp.check(p.returncode == 0, "srun: exit %d\n%s\n%s" % (p.returncode, p.stderr, c.logs()))
        run = w.run_dir("two")
        same_training(w.run_dir("one"), run, "srun -n2")
        each_epoch_once(run)
        zp.check(sorted(stats_of(run, "cache")) == [0], sorted(stats_of(run, "cache")))
        zp.check(sorted(stats_of(run, "loader")) == [0, 1], sorted(stats_of(run, "loader")))
        # one warm task on the node fills its cache: the next run's epoch 1 is all hits
        warm = config(w, "warm", 32)
        p = c.run("srun", "--quiet", "--ntasks-per-node=1", zp.BIN, "warm", warm, cwd=w.path)
        zp.check(p.returncode == 0, "warm: %s" % p.stderr)
        p = srun(c, w, 2, [zp.BIN, "up", warm])
        zp.check(p.returncode == 0, p.stderr)
        hits = [r for r in zp.metrics(w.run_dir("warm")) if r.get("event") == "cache" and
                r["epoch"] == 0 and r["split"] == "train"]
        zp.check(len(hits) == 2 and all(h["misses"] == 0 and h["hits"] > 0 for h in hits), hits)


def a_node_name_that_does_not_resolve_is_reached_at_rank_0s_address():
    name = "zp-nowhere-%d" % os.getpid()
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm"), name=name) as c:
        p = srun(c, w, 2, [zp.BIN, "up", config(w, "far", 32)])
        zp.check(p.returncode == 0, "srun: exit %d\n%s" % (p.returncode, p.stderr))
        zp.check("rank 0 by its host's name: %s does not resolve here" % name in p.stderr and
                 "reached at the address it announced" in p.stderr, p.stderr)
        each_epoch_once(w.run_dir("far"))


def a_rank_that_cannot_reach_rank_0_says_so_in_seconds():
    """Rank 1 in a network namespace of its own (no link at all): neither
    rank 0's name nor its addresses answer."""
    ns = "zpiso%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
            cfg = config(w, "cut", 32)
            wrap = ['if [ "$SLURM_PROCID" = 1 ]; then exec nsenter --net=/run/netns/%s "$@"; '
                    'else exec "$@"; fi' % ns]
            p = srun(c, w, 2, ["bash", "-c"] + wrap + ["rank", zp.BIN, "up", cfg,
                                                      "trainer.comm_timeout_s=300"], timeout=200)
            zp.check(p.returncode != 0, "srun should fail: %s" % p.stderr)
            want = "Slurm rank 1: cannot reach rank 0 on %s port %d within 20 s" % (
                slurm_cluster.socket.gethostname().split(".")[0], PORT + 2)
            zp.check(want in p.stderr and "transport.bind" in p.stderr, p.stderr)
            # said in seconds: srun's bound above (200 s) is below trainer.comm_timeout_s
    finally:
        subprocess.run(["ip", "netns", "del", ns])


BATCH = """#!/bin/bash
#SBATCH --job-name=zeus-pipe
#SBATCH --ntasks=2
srun --kill-on-bad-exit=1 {bin} up {cfg}
"""


def scancel_mid_epoch_ends_every_process_and_leaves_nothing():
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        cfg = config(w, "long", 32, epochs=1000, cost=200)
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("long")
        rank1 = os.path.join(run, "rank-1")
        metrics = os.path.join(run, "metrics.jsonl")
        zp.wait_for(lambda: os.path.exists(metrics) and any(
                        m.get("event") == "step" and m.get("step", 0) >= 8 for m in zp.metrics(run)),
                    120, "training steps (job %s: %s)" % (job, c.job(job).get("JobState")))
        rings = (zp.ring_path(run, 0), zp.ring_path(rank1, 1))
        zp.check(zp.stage_pids(run) and all(os.path.exists(r) for r in rings), "a running job")
        cancel_leaves_nothing(c, job, w.path + "/runs", [run, rank1])
        # the run's folder says why it stopped: scancel's SIGTERM
        why = zp.text(os.path.join(run, "stopped")).strip()
        zp.check(why == "the run was stopped by signal 15 (Terminated)", why)

def batch_lines(run):
    """rank 0's batches.log: (epoch, index, step, digest) a line, in order."""
    with open(os.path.join(run, "batches.log")) as f:
        return [tuple(line.split()[:4]) for line in f]


def steps_of(run):
    return [m for m in zp.metrics(run) if m.get("event") == "step"]


def trained_as_uninterrupted(w, run, how):
    """The run cut into parts (`how`) trained exactly rank 0's batches of the
    uninterrupted job "full" of 6 epochs, none twice, to the same final test
    loss, and recorded each epoch once, the cut ones over their parts."""
    full, cut = batch_lines(w.run_dir("full")), batch_lines(run)
    zp.check(len(full) == len(cut) and full == cut, "rank 0's batches: %d uninterrupted, %d %s"
             % (len(full), len(cut), how))
    a = zp.epoch_ends(w.run_dir("full"), "test")[-1]["loss"]
    b = zp.epoch_ends(run, "test")[-1]["loss"]
    zp.check(abs(a - b) <= 1e-5, "final test loss %r uninterrupted, %r %s" % (a, b, how))
    each_epoch_once(run, epochs=6)


def wait_steps(c, job, run, n):
    metrics = os.path.join(run, "metrics.jsonl")
    zp.wait_for(lambda: os.path.exists(metrics) and any(
        m.get("step", 0) >= n for m in steps_of(run)), 120,
        "%d steps (job %s: %s)" % (n, job, c.job(job).get("JobState")))


def usr1_saves_a_two_task_job_and_srun_up_resume_goes_on_exactly():
    """Slurm's warning signal (scancel --signal=USR1: what --signal=USR1@60
    sends) mid-epoch: both tasks stop with exit 4, rank 0 saved where the
    job goes on; `srun zeus-pipe up --resume RUN` trains exactly the batches
    of an uninterrupted job, none twice, to the same loss."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        p = srun(c, w, 2, [zp.BIN, "up", config(w, "full", 32, epochs=6, cost=1500, cache="false")])
        zp.check(p.returncode == 0, p.stderr)
        cfg = config(w, "cut", 32, epochs=6, cost=1500, cache="false")
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("cut")
        wait_steps(c, job, run, 40)
        zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
        c.wait_job(job, 120)
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        zp.check(out.count("stopped by SIGUSR1 after saving (exit status 4)") == 2 and
                 "resume with `srun zeus-pipe up --resume %s` (with any number of tasks)" % run in out,
                 out[-3000:])
        zp.check(not processes_of(w.path + "/runs"), "a process of the job is left")
        p = srun(c, w, 2, [zp.BIN, "up", "--resume", run])
        zp.check(p.returncode == 0, "resume: exit %d\n%s" % (p.returncode, p.stderr))
        zp.check("resuming %s at epoch" % run in p.stderr, p.stderr)
        trained_as_uninterrupted(w, run, "saved and resumed")


RESUME = """#!/bin/bash
#SBATCH --job-name=zeus-pipe
#SBATCH --ntasks={n}
srun --kill-on-bad-exit=1 {bin} up --resume {run}
"""


def a_saved_job_goes_on_with_3_tasks_and_then_with_2():
    """Another number of tasks: a job of 2 tasks saved mid-epoch (USR1) goes
    on as a job of 3 (`srun -n3 zeus-pipe up --resume RUN`: the rest of the
    epoch sharded over 3, the ranks' keys made anew, RUN/rank-2 made), is
    saved again and ends as 2 tasks again: every epoch of the run exactly
    once over the three parts."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm"), cpus=3) as c:
        cfg = config(w, "grow", 32, epochs=4, cost=1500, cache="false")
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("grow")
        wait_steps(c, job, run, 24)
        zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
        c.wait_job(job, 120)
        steps = max(m.get("step", 0) for m in steps_of(run))
        job = c.sbatch(RESUME.format(n=3, bin=zp.BIN, run=run), w.path)
        wait_steps(c, job, run, steps + 8)
        zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
        c.wait_job(job, 120)
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        zp.check("with 3 ranks where it had 2" in out and
                 out.count("stopped by SIGUSR1 after saving (exit status 4)") == 3, out[-3000:])
        zp.check(os.path.isdir(os.path.join(run, "rank-2")), "no RUN/rank-2")
        p = srun(c, w, 2, [zp.BIN, "up", "--resume", run])
        zp.check(p.returncode == 0, "resume as 2 tasks: exit %d\n%s" % (p.returncode, p.stderr))
        zp.check("with 2 ranks where it had 3" in p.stderr, p.stderr[-2000:])
        each_epoch_once(run, epochs=4)


def requeued(c, job, times):
    """Waits until the job was requeued `times` times and runs again."""
    zp.wait_for(lambda: int(c.job(job).get("Restarts", "0")) >= times and
                c.job(job).get("JobState") == "RUNNING", 120, "the job's requeue %d" % times)


def usr1_with_slurm_requeue_requeues_the_job_twice_and_it_resumes_by_itself():
    """slurm.requeue: after the save rank 0 requeues the job (scontrol
    requeue); the same batch script, started again (SLURM_RESTART_COUNT),
    resumes the run by itself. Preempted twice: every batch of the
    uninterrupted job exactly once over the three parts, the same final
    loss; the mark is gone once the run finished."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        p = srun(c, w, 2, [zp.BIN, "up", config(w, "full", 32, epochs=6, cost=1500, cache="false")])
        zp.check(p.returncode == 0, p.stderr)
        cfg = config(w, "rq", 32, epochs=6, cost=1500, cache="false")
        with open(cfg, "a") as f:
            f.write("slurm: {requeue: true}\n")
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("rq")
        for times, steps in ((1, 30), (2, 60)):
            wait_steps(c, job, run, steps)
            zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
            requeued(c, job, times)
        state = c.wait_job(job, 300, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        zp.check(state == "COMPLETED", "job %s: %s (%s)\n%s\n%s" % (
            job, state, c.job(job).get("Reason"), out[-4000:], c.logs()))
        zp.check("restart 2 (slurm.requeue): resuming %s with its own config" % run in out and
                 "run finished: %s" % run in out, out[-4000:])
        zp.check(not os.path.exists(os.path.join(w.path, "runs", ".slurm-%s.requeue" % job)),
                 "the requeue mark is left after the run finished")
        trained_as_uninterrupted(w, run, "saved, requeued and resumed twice")


LIMITED = """#!/bin/bash
#SBATCH --job-name=zeus-pipe
#SBATCH --ntasks=2
#SBATCH --time=1
#SBATCH --signal=USR1@40
srun --kill-on-bad-exit=1 {bin} up {cfg} loader.workers=1
"""


def a_real_time_limit_warns_each_attempt_and_the_requeued_job_goes_on():
    """A job of a minute (`--time=1 --signal=USR1@40`) whose run needs about
    65 s, with slurm.requeue: Slurm's own warning, 40 s before the limit (sent
    by slurmctld's time-limit check, up to 30 s late), saves and requeues each
    attempt before its limit; the run goes on attempt after attempt to its
    end, never killed at the limit: every batch of the uninterrupted job
    exactly once over the parts, the same final loss."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        p = srun(c, w, 2, [zp.BIN, "up", config(w, "full", 32, epochs=6, cost=1500, cache="false")])
        zp.check(p.returncode == 0, p.stderr)
        # one loader spinning 8 ms a sample: 1,225 samples an epoch, 6 epochs,
        # past the warning's latest (50 s after the start)
        cfg = config(w, "limit", 32, epochs=6, cost=8000, cache="false")
        with open(cfg, "a") as f:
            f.write("slurm: {requeue: true}\n")
        job = c.sbatch(LIMITED.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("limit")
        state = c.wait_job(job, 600, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        restarts = int(c.job(job).get("Restarts", "0"))
        zp.check(state == "COMPLETED", "job %s: %s (%s)\n%s\n%s" % (
            job, state, c.job(job).get("Reason"), out[-4000:], c.logs()))
        # slurm-<job>.out is the last attempt's (sbatch truncates it at each start)
        zp.check(restarts >= 1 and "restart %d (slurm.requeue): resuming %s" % (restarts, run) in out
                 and "run finished: %s" % run in out, "%d restarts\n%s" % (restarts, out[-4000:]))
        trained_as_uninterrupted(w, run, "over %d attempts" % (restarts + 1))
        print("time limit: %d attempts" % (restarts + 1))


def usr1_before_the_first_step_requeues_a_job_that_starts_again():
    """A warning before any step: nothing to save, no mark; the requeued job
    starts the run again from the beginning, a new run, every epoch once."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        cfg = config(w, "early", 32, epochs=2, cost=3000, cache="false")
        with open(cfg, "a") as f:
            f.write("slurm: {requeue: true}\n")
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("early")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "rank-1")), 60, "both tasks started")
        zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
        requeued(c, job, 1)
        state = c.wait_job(job, 300, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        zp.check(state == "COMPLETED", "job %s: %s\n%s" % (job, state, out[-4000:]))
        zp.check("resuming" not in out, out[-3000:])
        again = w.run_dir("early-2")
        each_epoch_once(again)


REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def docs_script(runs):
    """docs/ranks-and-nodes.md's first batch script, without its GPU lines,
    2 tasks a node (these nodes have 2 CPUs), one epoch and the run in `runs`."""
    text = open(os.path.join(REPO, "docs", "ranks-and-nodes.md")).read()
    start = text.index("    #!/bin/bash\n")
    lines = []
    for line in text[start:].split("\n"):
        if not line.startswith("    "):
            break
        lines.append(line[4:])
    script = "\n".join(lines) + "\n"
    zp.check("--gpus-per-task=1" in script and "trainer.backend=cuda" in script, script)
    script = script.replace("#SBATCH --gpus-per-task=1\n", "").replace("#SBATCH --cpus-per-task=8\n", "")
    script = script.replace("--ntasks-per-node=4", "--ntasks-per-node=2")
    return script.replace("trainer.backend=cuda", "trainer.epochs=1 run.dir=%s" % runs)


def the_documented_batch_script_on_two_nodes():
    """Two real nodes (a slurmd per network namespace, each with its own
    /tmp/zp-cache), the docs' sbatch script: 2 nodes x 2 tasks, the epoch
    exactly once, one cache stage and LMDB per node, the report; a second
    job's scancel mid-epoch ends every process on both nodes and leaves no
    ring and no socket file."""
    from netns import Nodes
    why = Nodes.available()
    if why:
        raise AssertionError("no network namespaces here: %s" % why)
    with zp.Workdir() as w, Nodes(2, rate=None, host=True) as nodes, slurm_cluster.Cluster(
            os.path.join(w.path, "slurm"), nodes=nodes,
            local={"/tmp/zp-cache": os.path.join(w.path, "node%d-tmp")}) as c:
        runs = os.path.join(w.path, "runs")
        script = docs_script(runs)
        args = ["--output=%s/slurm-%%j.out" % w.path, "--chdir=" + REPO,  # configs/ is the repo's
                "--export=ALL,PATH=%s:%s" % (os.path.dirname(zp.BIN), os.environ["PATH"])]
        job = c.sbatch(script, w.path, *args)
        state = c.wait_job(job, 600)
        out = zp.text(os.path.join(w.path, "slurm-%s.out" % job))
        zp.check(state == "COMPLETED", "job %s: %s\n%s\n%s" % (job, state, out[-4000:], c.logs()))
        run = os.path.join(runs, "fashion-mnist")
        for split, n in (("train", 60000), ("test", 10000)):
            ends = zp.epoch_ends(run, split)
            zp.check(len(ends) == 1 and ends[0]["samples"] == ends[0]["distinct"] == n, ends)
        zp.check(sorted(stats_of(run, "cache")) == [0, 2], "cache stages %s" % sorted(stats_of(run, "cache")))
        for node in (0, 1):
            zp.check(os.path.getsize(os.path.join(w.path, "node%d-tmp" % node, "data.mdb")) > 0,
                     "node %d has no cache of its own" % node)
        zp.check("train_loss" in zp.text(os.path.join(run, "report.txt")), "no report")
        # scancel mid-epoch: every process on both nodes ends, nothing is left
        job = c.sbatch(script.replace("trainer.epochs=1", "trainer.epochs=50 cache.enabled=false"),
                       w.path, *args)
        run = os.path.join(runs, "fashion-mnist-2")
        wait_steps(c, job, run, 20)
        cancel_leaves_nothing(c, job, runs, [run] + [os.path.join(run, "rank-%d" % r) for r in (1, 2, 3)])


# Slurm keeps a job's first SLURM_NTASKS in the environment of every attempt,
# also after `scontrol update NumTasks=`: a script whose requeue may get another
# shape asks for the task count the attempt has (docs/ranks-and-nodes.md).
SHAPED = """#!/bin/bash
#SBATCH --job-name=zeus-pipe
#SBATCH --nodes=2
#SBATCH --ntasks=4
#SBATCH --open-mode=append
export SLURM_NTASKS=$(scontrol show job -o "$SLURM_JOB_ID" | grep -o 'NumTasks=[0-9]*' | cut -d= -f2)
export SLURM_NPROCS=$SLURM_NTASKS
srun --kill-on-bad-exit=1 {bin} up {cfg} loader.workers=1
"""


def reshaped(c, job, times, nodes, tasks):
    """Catches the job requeued for the `times`th time while it waits, and
    gives it another shape, as an admin would when nodes are lost or taken
    (scontrol hold, update, release; its CPUs too, which the first
    allocation fixed): the next attempt gets `tasks` tasks on `nodes` nodes."""
    zp.wait_for(lambda: int(c.job(job).get("Restarts", "0")) >= times and
                c.job(job).get("JobState") == "PENDING", 120, "requeue %d" % times)
    shape = ("NumTasks=%d" % tasks, "NumCPUs=%d" % tasks, "NumNodes=%d-%d" % (nodes, nodes))
    for argv in (("hold", job), ("update", "JobId=" + job) + shape, ("release", job)):
        p = c.run("scontrol", *argv)
        zp.check(p.returncode == 0, "scontrol %s: %s" % (" ".join(argv), p.stderr))
    zp.wait_for(lambda: c.job(job).get("JobState") in ("RUNNING", "COMPLETED", "FAILED",
                                                        "CANCELLED"), 120, "attempt %d" % (times + 1))
    got = c.job(job)
    zp.check(got.get("JobState") in ("RUNNING", "COMPLETED"), "attempt %d: %s (%s)\n%s" % (
        times + 1, got.get("JobState"), got.get("Reason"), zp.text(got.get("StdOut", ""))[-4000:]))
    zp.check(got.get("NumNodes") == str(nodes) and got.get("NumTasks") == str(tasks),
             "attempt %d: %s nodes, %s tasks" % (times + 1, got.get("NumNodes"), got.get("NumTasks")))


def a_requeued_job_goes_on_with_another_shape():
    """The requeue of a job of 2 nodes x 2 tasks (slurm.requeue: true) is
    given 1 node x 2 tasks, and, requeued again, 3 tasks over 2 nodes: each
    attempt resumes by itself with its own number of ranks, and every epoch
    of the run is trained exactly once over the three attempts."""
    from netns import Nodes
    why = Nodes.available()
    if why:
        raise AssertionError("no network namespaces here: %s" % why)
    with zp.Workdir() as w, Nodes(2, rate=None, host=True) as nodes, slurm_cluster.Cluster(
            os.path.join(w.path, "slurm"), nodes=nodes) as c:
        cfg = config(w, "shape", 32, epochs=4, cost=1500, cache="false")
        with open(cfg, "a") as f:
            f.write("slurm: {requeue: true}\n")
        job = c.sbatch(SHAPED.format(bin=zp.BIN, cfg=cfg), w.path)
        run = w.run_dir("shape")
        out = os.path.join(w.path, "slurm-%s.out" % job)
        steps = 0
        for times, (n_nodes, tasks) in enumerate(((1, 2), (2, 3)), 1):
            steps += 8
            try:
                wait_steps(c, job, run, steps)
            except AssertionError as e:
                raise AssertionError("%s\n%s" % (e, zp.text(out)[-4000:]))
            zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
            reshaped(c, job, times, n_nodes, tasks)
            steps = max(m.get("step", 0) for m in steps_of(run))
        state = c.wait_job(job, 300, ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))
        out = zp.text(out)
        zp.check(state == "COMPLETED", "job %s: %s\n%s\n%s" % (job, state, out[-4000:], c.logs()))
        zp.check("with 2 ranks where it had 4" in out and "with 3 ranks where it had 2" in out,
                 "\n".join(l for l in out.split("\n") if "resum" in l or "restart" in l))
        each_epoch_once(run, epochs=4)


HANG_CONFIG = """
run: {{name: hang}}
dataset:
  source: python
  python:
    class: zp_test_data:Fields
    path: [{data}]
    args: {{n: 600, hang_at: 100, marker: '{marker}', cost_ms: 2}}
    interpreter: {python}
loader: {{workers: 2, task_size: 16}}
prefetch: {{batch_size: 32, depth: 2}}
trainer: {{backend: null, epochs: 50}}
transport: {{bind: "0.0.0.0:{port}"}}
"""


def scancel_of_a_job_whose_loader_hangs_in_getitem_ends_it_all():
    """A Python Dataset whose __getitem__ hangs (time.sleep(3600)) in one
    loader: scancel still ends every process of the job within KillWait and
    leaves no ring and no socket file."""
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        marker = os.path.join(w.path, "hung")
        cfg = w.write("hang.yaml", HANG_CONFIG.format(data=zp.PYDATA, marker=marker,
                                                      python=sys.executable, port=PORT))
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg=cfg), w.path,
                       "--export=ALL,PYTHONPATH=" + zp.PACKAGE)
        run = w.run_dir("hang")
        rank1 = os.path.join(run, "rank-1")
        rings = (zp.ring_path(run, 0), zp.ring_path(rank1, 1))
        zp.wait_for(lambda: os.path.exists(marker) and all(os.path.exists(r) for r in rings), 120,
                    "a loader hung in __getitem__ (job %s: %s)" % (job, c.job(job).get("JobState")))
        cancel_leaves_nothing(c, job, w.path + "/runs", [run, rank1])


DDP_CONFIG = """
run: {{name: {name}}}
seed: 7
dataset:
  source: synthetic
  synthetic: {{train_samples: 1000, test_samples: 100, shape: [1, 6, 5], classes: 4, cost_us: 2000}}
loader: {{workers: 2, task_size: 25}}
prefetch: {{batch_size: 50, depth: 2, drop_last: true}}
trainer: {{epochs: 4, command: [{python}, {script}]}}
transport: {{bind: "0.0.0.0:{port}"}}
"""

# The documented pattern: once a step, every rank asks stop_requested(); on
# yes it saves the model, the optimizer and zp.state_dict() and leaves. Started
# again, it loads them and goes on. batches-RANK.txt: a line a train step.
DDP_SCRIPT = """
import os, torch, torch.distributed as dist, torch.nn.functional as F
import zeus_pipe
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(30, 16), torch.nn.ReLU(),
                            torch.nn.Linear(16, 4))
ddp = DDP(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
state, epoch, stopped = "state-%d.pt" % rank, 0, False
out = open("batches-%d.txt" % rank, "a")
with zeus_pipe.attach() as zp:
    if os.path.exists(state):
        s = torch.load(state)
        model.load_state_dict(s["model"]); opt.load_state_dict(s["opt"])
        zp.load_state_dict(s["data"]); epoch = s["epoch"]
    while epoch < 4 and not stopped:
        for x, y in zp.train:
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()
            print("train", epoch, ",".join(map(str, zp.indices.tolist())), file=out, flush=True)
            if zp.stop_requested():
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "data": zp.state_dict(), "epoch": epoch}, state)
                stopped = True
                break
        epoch += 0 if stopped else 1
if rank == 0 and not stopped:
    torch.save([p.detach() for p in model.parameters()], "final.pt")
dist.destroy_process_group()
"""


def a_ddp_program_saves_with_stop_requested_and_goes_on_exactly():
    """Two gloo ranks of a user's program under srun, the documented
    pattern: USR1 mid-epoch, both ranks stop at the same step and save; the
    job started again goes on from their saves, and each rank's batches over
    both parts are those of an uninterrupted job, none twice, to the same
    parameters."""
    try:
        import torch
    except ImportError:
        print("SKIP %s: %s has no torch" % ("a_ddp_program_...", sys.executable))
        return
    from test_python import PACKAGE, python_command
    with zp.Workdir() as w, slurm_cluster.Cluster(os.path.join(w.path, "slurm")) as c:
        env = c.env(PYTHONPATH=os.path.abspath(PACKAGE))
        folders = {}
        for name in ("whole", "cut"):
            d = folders[name] = os.path.join(w.path, name)
            os.makedirs(d)
            w.write(name + "/ddp.py", DDP_SCRIPT)
            w.write(name + "/ddp.yaml", DDP_CONFIG.format(name=name, python=python_command(),
                                                          script=os.path.join(d, "ddp.py"), port=PORT))
        p = c.run("srun", "--quiet", "-n2", "--kill-on-bad-exit=1", zp.BIN, "up", "ddp.yaml",
                  cwd=folders["whole"], env=env)
        zp.check(p.returncode == 0, "whole: exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        cut = folders["cut"]
        job = c.sbatch(BATCH.format(bin=zp.BIN, cfg="ddp.yaml"), cut, "--export=ALL,PYTHONPATH=" +
                       os.path.abspath(PACKAGE))
        log = os.path.join(cut, "batches-0.txt")
        zp.wait_for(lambda: len(zp.text(log).splitlines()) >= 15, 120, "15 steps of the cut job")
        zp.check(c.run("scancel", "--signal=USR1", job).returncode == 0, "scancel")
        c.wait_job(job, 120)
        out = zp.text(os.path.join(cut, "slurm-%s.out" % job))
        zp.check(out.count("stopped by SIGUSR1 after saving") == 2 and "the program goes on from "
                 "the zeus_pipe state_dict() it saved" in out, out[-3000:])
        zp.check(all(os.path.exists(os.path.join(cut, "state-%d.pt" % r)) for r in (0, 1)),
                 "a rank did not save")
        cut_lines = [len(zp.text(os.path.join(cut, "batches-%d.txt" % r)).splitlines()) for r in (0, 1)]
        zp.check(cut_lines[0] == cut_lines[1] and 15 <= cut_lines[0] < 40,
                 "the ranks stopped after %s steps: not the same step" % cut_lines)
        p = c.run("srun", "--quiet", "-n2", "--kill-on-bad-exit=1", zp.BIN, "up", "ddp.yaml",
                  cwd=cut, env=env)
        zp.check(p.returncode == 0, "resumed: exit %d\n%s" % (p.returncode, p.stderr[-3000:]))
        for r in (0, 1):
            a = zp.text(os.path.join(folders["whole"], "batches-%d.txt" % r)).splitlines()
            b = zp.text(os.path.join(cut, "batches-%d.txt" % r)).splitlines()
            zp.check(len(a) == 40 and a == b, "rank %d: %d steps whole, %d saved and resumed, %s"
                     % (r, len(a), len(b), "the same" if a == b else "other batches"))
        one = torch.load(os.path.join(folders["whole"], "final.pt"))
        two = torch.load(os.path.join(cut, "final.pt"))
        zp.check(all(torch.allclose(x, y, atol=1e-6) for x, y in zip(one, two)),
                 "the final parameters differ")


if __name__ == "__main__":
    why = slurm_cluster.available()
    if why:
        print("%s: %s" % ("FAIL" if slurm_cluster.required() else "SKIP", why))
        sys.exit(1 if slurm_cluster.required() else 77)
    every = [srun_trains_two_ranks_as_one_trainer_and_warms_the_node,
             a_node_name_that_does_not_resolve_is_reached_at_rank_0s_address,
             scancel_mid_epoch_ends_every_process_and_leaves_nothing,
             usr1_saves_a_two_task_job_and_srun_up_resume_goes_on_exactly,
             the_documented_batch_script_on_two_nodes]
    # Slurm's own timing (requeue holds, the 20 s reach deadline) and Python
    # (torch, a Dataset) under the sanitizer make these the longest; their C paths are the ones
    # above: the normal build runs them, the sanitizer build leaves them out
    longest = [a_rank_that_cannot_reach_rank_0_says_so_in_seconds,
               usr1_with_slurm_requeue_requeues_the_job_twice_and_it_resumes_by_itself,
               usr1_before_the_first_step_requeues_a_job_that_starts_again,
               a_real_time_limit_warns_each_attempt_and_the_requeued_job_goes_on,
               a_saved_job_goes_on_with_3_tasks_and_then_with_2,
               a_requeued_job_goes_on_with_another_shape,
               a_ddp_program_saves_with_stop_requested_and_goes_on_exactly,
               scancel_of_a_job_whose_loader_hangs_in_getitem_ends_it_all]
    if zp.sanitizer_env():
        print("sanitizer build: not run here (the normal build runs them): %s"
              % ", ".join(t.__name__ for t in longest))
        longest = []
    zp.main(every + longest)
