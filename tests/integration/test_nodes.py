"""Slurm across nodes: each "node" is a network namespace with its own address
and a 1 Gbit/s link to a bridge (netns.py); the tasks are real `zeus-pipe up`
processes with the variables srun sets, sharing the filesystem as a
cluster's run.dir. Every node runs its own data plane (cache stage, loaders,
LMDB at its own cache.path): two nodes of batch B train exactly as one
trainer of batch 2 x B, each epoch proves every sample once, and samples do
not cross the links (the veth counters: what crosses is events and sums). A
node's cache built from another dataset is refused naming the node, and a
node whose data plane dies stops the job naming the node: its leader says so
in its node rendezvous, where rank 0 and the node's other tasks read it."""
import json
import os
import signal
import sys
import time
import zp
from netns import Nodes
from test_ranks import CONFIG, same_training
from test_slurm import stats_of

PORT = 19000 + (os.getpid() % 400) * 4


def config(w, name, batch, shape="[1, 12, 16]", backend="cpu", cache="true"):
    text = CONFIG.format(name=name, gpus=1, batch=batch, train=1025, corrupt=0, epochs=2, cost=0)
    text = text.replace("[1, 12, 16]", shape).replace("backend: cpu", "backend: " + backend)
    text += 'transport: {bind: "0.0.0.0:%d"}\ncache: {enabled: %s}\n' % (PORT, cache)
    return w.write(name + ".yaml", text)


def task(w, nodes, rank, ntasks, node, local, cfg, *over, job="4242"):
    env = dict(os.environ, **nodes.slurm_env(rank, ntasks, node, local, job))
    return w.start("up", cfg, "cache.path=%s/cache-node%d" % (w.path, node), *over, env=env,
                   prefix=nodes.wrap(node, []))


def finish(p, timeout=240):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, err


def stage_pid(run_dir, name):
    """The pid of `zeus-pipe stage NAME --run RUN_DIR`, or None."""
    for pid in zp.stage_pids(run_dir):
        try:
            argv = open("/proc/%d/cmdline" % pid, "rb").read().decode().split("\0")
        except OSError:
            continue
        if name in argv and run_dir in argv:
            return pid
    return None


def two_nodes_train_as_one_and_each_keeps_its_own_plane():
    with zp.Workdir() as w, Nodes(2) as nodes:
        rc, out, err = w.run("up", config(w, "one", 64))
        zp.check(rc == 0, err)
        two = config(w, "two", 32)
        r1 = task(w, nodes, 1, 2, 1, 0, two)
        r0 = task(w, nodes, 0, 2, 0, 0, two)
        (rc0, err0), (rc1, err1) = finish(r0), finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        run = w.run_dir("two")
        same_training(w.run_dir("one"), run, "2 nodes")
        for split, n in (("train", 1025), ("test", 200)):
            ends = zp.epoch_ends(run, split)
            zp.check(len(ends) == 2 and all(e["samples"] == e["distinct"] == n for e in ends), ends)
        # a cache stage and loaders per node, each node's LMDB on its own path; all their
        # events reached rank 0's logger over the link
        zp.check(sorted(stats_of(run, "cache")) == [0, 1], sorted(stats_of(run, "cache")))
        loaders = sorted(stats_of(run, "loader"))
        zp.check(loaders == [0, 1, 256, 257], "loaders %r" % loaders)
        for node in (0, 1):
            zp.check(os.path.getsize(os.path.join(w.path, "cache-node%d" % node, "data.mdb")) > 0,
                     "node %d has no cache" % node)
        # epoch 2: each rank read its hits from its own node's LMDB
        for rank in (0, 1):
            hits = [r for r in zp.metrics(run) if r.get("event") == "cache" and r["instance"] == rank
                    and r["split"] == "train" and r["epoch"] == 1]
            zp.check(hits and hits[0]["hits"] > 0, "rank %d's epoch-2 cache record: %r" % (rank, hits))


def no_sample_crosses_a_link():
    with zp.Workdir() as w, Nodes(2) as nodes:
        # samples of 48 KiB, a trainer that only consumes them, no cache: every epoch loads
        # every sample again, on the node whose rank asked for it
        big = config(w, "big", 32, shape="[3, 64, 64]", backend='"null"', cache="false")
        before = [nodes.link_bytes(i) for i in (0, 1)]
        r0 = task(w, nodes, 0, 2, 0, 0, big)
        r1 = task(w, nodes, 1, 2, 1, 0, big)
        (rc0, err0), (rc1, err1) = finish(r0), finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        run = w.run_dir("big")
        for split, n in (("train", 1025), ("test", 200)):
            ends = zp.epoch_ends(run, split)
            zp.check(len(ends) == 2 and all(e["samples"] == e["distinct"] == n for e in ends), ends)
        carried = [nodes.link_bytes(i) - before[i] for i in (0, 1)]
        # rank 1 consumed about half of 2 x 1225 samples of 49152 bytes: ~60 MB that the central
        # design sent over the link twice; what crossed is events, stats and the epochs' sums
        sample_bytes = 49152 * 1225  # 4 bytes x 3 x 64 x 64, half of 2 epochs of 1225
        zp.check(carried[1] > 0, "nothing crossed node 1's link: did its events reach rank 0?")
        zp.check(carried[1] < sample_bytes // 20,
                 "node 1's link carried %d bytes, against %d bytes of rank 1's samples" % (carried[1], sample_bytes))
        print("link bytes: node 0 %d, node 1 %d; rank 1's samples ~%d bytes" % (carried[0], carried[1], sample_bytes))


def each_node_warms_its_own_cache_and_the_run_loads_nothing():
    with zp.Workdir() as w, Nodes(2) as nodes:
        cfg = config(w, "warmed", 32)
        warms = []
        for node in (0, 1):  # `srun --ntasks-per-node=1 zeus-pipe warm`, at once
            env = dict(os.environ, **nodes.slurm_env(node, 2, node, 0, "7171"))
            warms.append(w.start("warm", cfg, "cache.path=%s/cache-node%d" % (w.path, node), env=env,
                                 prefix=nodes.wrap(node, [])))
        for node, p in enumerate(warms):
            rc, err = finish(p, 120)
            zp.check(rc == 0, "warm on node %d exit %s: %s" % (node, rc, err))
            zp.check(os.path.isdir(os.path.join(w.path, "runs", "warmed-warm-" + nodes.addr(node))), err)
        r0 = task(w, nodes, 0, 2, 0, 0, cfg)
        r1 = task(w, nodes, 1, 2, 1, 0, cfg)
        (rc0, err0), (rc1, err1) = finish(r0), finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        run = w.run_dir("warmed")
        # every epoch of both ranks read from its node's warm LMDB: no miss at all
        caches = [r for r in zp.metrics(run) if r.get("event") == "cache"]
        zp.check(sorted({r["instance"] for r in caches}) == [0, 1] and
                 all(r["misses"] == 0 and r["hits"] > 0 for r in caches),
                 "cache records of warm runs: %r" % caches)
        # and the loaders that reported loaded nothing (an idle loader's only stats
        # record, sent as it stops, can miss rank 0's logger: at least one a node)
        loaded = {i: r["total_items"] for i, r in stats_of(run, "loader").items()}
        zp.check({0, 1} & set(loaded) and {256, 257} & set(loaded) and not any(loaded.values()),
                 "loaders loaded %r from warm caches" % loaded)
        for split, n in (("train", 1025), ("test", 200)):
            ends = zp.epoch_ends(run, split)
            zp.check(len(ends) == 2 and all(e["samples"] == e["distinct"] == n for e in ends), ends)


def records_of(run_dir):
    """{(stage, instance): 1 when its final stats record is in, else 0}."""
    seen = {}
    try:
        with open(os.path.join(run_dir, "stats.jsonl")) as f:
            for line in f:
                if line.endswith("\n"):
                    r = json.loads(line)
                    key = (r["stage"], r["instance"])
                    seen[key] = seen.get(key, 0) | r.get("final", 0)
    except FileNotFoundError:
        pass
    return seen


def wait_for(what, pred, timeout=120):
    until = time.time() + timeout
    while not pred():
        zp.check(time.time() < until, "gave up waiting for " + what)
        time.sleep(0.05)


def a_rank_ending_after_rank_0_still_has_its_last_records_logged():
    # Rank 0's logger takes every rank's events. Rank 1's supervisor is
    # stopped (SIGSTOP) while its stages run, and let go 4 s after rank 0's
    # trainer ended: rank 0 would have stopped its logger by then, and rank
    # 1's stages' final records (their whole-life totals) would be lost.
    with zp.Workdir() as w, Nodes(2) as nodes:
        cfg = config(w, "late", 32)
        over = ("trainer.epochs=40",)
        r0 = task(w, nodes, 0, 2, 0, 0, cfg, *over)
        r1 = task(w, nodes, 1, 2, 1, 0, cfg, *over)
        run = w.run_dir("late")
        rank1 = [("loader", 256), ("loader", 257), ("cache", 1), ("prefetch", 1), ("trainer", 1)]
        wait_for("rank 1's stages' first records", lambda: all(k in records_of(run) for k in rank1))
        with open(os.path.join(run, "rank-1", "supervisor.pid")) as f:
            sup1 = int(f.read())
        os.kill(sup1, signal.SIGSTOP)
        try:
            wait_for("trainer[0]'s final record", lambda: records_of(run).get(("trainer", 0)))
            time.sleep(4)
        finally:
            os.kill(sup1, signal.SIGCONT)
        (rc0, err0), (rc1, err1) = finish(r0), finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        seen = records_of(run)
        zp.check(all(seen.get(k) for k in rank1), "rank 1's final records: %r" % {k: seen.get(k) for k in rank1})


def each_node_retires_its_idle_loaders():
    with zp.Workdir() as w, Nodes(2) as nodes:
        cfg = config(w, "scaled", 32)
        for node in (0, 1):
            rc, out, err = w.run("warm", cfg, "cache.path=%s/cache-node%d" % (w.path, node))
            zp.check(rc == 0, err)
        auto = ("loader.autoscale=true", "loader.min_workers=1", "loader.max_workers=2",
                "loader.autoscale_interval_s=1", "logger.stat_interval_ms=250", "trainer.epochs=100000")
        r0 = task(w, nodes, 0, 2, 0, 0, cfg, *auto)
        r1 = task(w, nodes, 1, 2, 1, 0, cfg, *auto)
        run = w.run_dir("scaled")

        def retired():
            if not os.path.exists(os.path.join(run, "metrics.jsonl")):
                return {}
            ds = [m for m in zp.metrics(run) if m.get("event") == "autoscale" and m["change"] == -1]
            return {d["instance"]: d for d in ds}
        # each node's first task reads its node's counters from rank 0's logger (node 1 over its
        # link) and retires its node's idle loader over a warm cache
        zp.wait_for(lambda: len(retired()) == 2, 120, "both nodes retiring a loader")
        rc, out, err = w.run("down", run)
        zp.check(rc == 0, err)
        (rc0, err0), (rc1, err1) = finish(r0), finish(r1)
        zp.check(rc0 == 3, "rank 0 exit %s after down:\n%s" % (rc0, err0))
        zp.check(rc1 == 1 and "rank 0's run has ended" in err1, "rank 1 exit %s:\n%s" % (rc1, err1))
        for rank, err in ((0, err0), (1, err1)):
            d = retired()[rank]
            zp.check(d["workers_before"] == 2 and d["workers_after"] == 1 and d["busy"] < 0.25, d)
            zp.check("loader[%d] retired" % (256 * rank + 1) in err, err[-2000:])
        ends = zp.epoch_ends(run, "train")
        zp.check(ends and all(e["samples"] == e["distinct"] == 1025 for e in ends), ends[-1:])


def a_nodes_cache_of_another_dataset_is_refused_naming_the_node():
    with zp.Workdir() as w, Nodes(2) as nodes:
        other = w.write("other.yaml", CONFIG.format(name="other", gpus=1, batch=32, train=300, corrupt=0,
                                                    epochs=1, cost=0).replace("[1, 12, 16]", "[1, 8, 8]"))
        rc, out, err = w.run("warm", other, "cache.path=%s/cache-node1" % w.path)
        zp.check(rc == 0, err)
        cfg = config(w, "refused", 32)
        r0 = task(w, nodes, 0, 3, 0, 0, cfg, "trainer.comm_timeout_s=200", job="5151")
        r1 = task(w, nodes, 1, 3, 1, 0, cfg, "trainer.comm_timeout_s=200", job="5151")
        r2 = task(w, nodes, 2, 3, 1, 1, cfg, "trainer.comm_timeout_s=200", job="5151")
        rc1, err1 = finish(r1, 90)
        zp.check(rc1 == 2 and "node %s (Slurm rank 1)" % nodes.addr(1) in err1 and "local disk" in err1,
                 "rank 1 exit %s: %s" % (rc1, err1))
        rc0, err0 = finish(r0, 90)  # at once: not after trainer.comm_timeout_s
        zp.check(rc0 == 1 and "node %s's first task (Slurm rank 1), which runs the node's data plane, "
                 "stopped: its cache.path" % nodes.addr(1) in err0, "rank 0 exit %s: %s" % (rc0, err0))
        rc2, err2 = finish(r2, 90)  # node 1's other task
        zp.check(rc2 == 1 and "node %s's first task (Slurm rank 1)" % nodes.addr(1) in err2,
                 "rank 2 exit %s: %s" % (rc2, err2))


def a_node_whose_data_plane_dies_stops_naming_the_node():
    with zp.Workdir() as w, Nodes(2) as nodes:
        cfg = config(w, "dies", 32)
        # the ranks' sums would wait 200 s for the lost ranks: what stops them is the node's word
        slow = ("dataset.synthetic.cost_us=3000", "trainer.epochs=20", "trainer.comm_timeout_s=200")
        r0 = task(w, nodes, 0, 3, 0, 0, cfg, *slow, job="6161")
        r1 = task(w, nodes, 1, 3, 1, 0, cfg, *slow, job="6161")
        r2 = task(w, nodes, 2, 3, 1, 1, cfg, *slow, job="6161")  # node 1's second task
        run = w.run_dir("dies")
        rank1 = os.path.join(run, "rank-1")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "rank-2", "batches-rank2.log")), 90,
                    "rank 2 training on node 1's plane")
        try:  # its process is up: it is awaited only as /proc is read while stages come and go
            pid = zp.wait_for(lambda: stage_pid(rank1, "cache"), 10, "node 1's cache stage")
        except AssertionError:
            zp.check(False, "no cache stage of node 1 among %s" % [
                open("/proc/%d/cmdline" % x, "rb").read().replace(b"\0", b" ") for x in zp.stage_pids(w.path)])
        os.kill(pid, signal.SIGKILL)
        rc1, err1 = finish(r1, 60)
        zp.check(rc1 == 1 and "cache[1] was killed by signal 9 (Killed) on node %s" % nodes.addr(1) in err1,
                 "rank 1 exit %s: %s" % (rc1, err1))
        rc2, err2 = finish(r2, 60)
        zp.check(rc2 == 1 and "node %s's first task (Slurm rank 1)" % nodes.addr(1) in err2,
                 "rank 2 exit %s: %s" % (rc2, err2))
        rc0, err0 = finish(r0, 90)
        said = "node %s's first task (Slurm rank 1), which runs the node's data plane, stopped: " \
               "cache[1] was killed" % nodes.addr(1)
        zp.check(rc0 == 1 and said in err0, "rank 0 exit %s: %s" % (rc0, err0))


if __name__ == "__main__":
    why = Nodes.available()
    if why:
        print("skipped: network namespaces: " + why)
        sys.exit(77)
    zp.main([two_nodes_train_as_one_and_each_keeps_its_own_plane,
             no_sample_crosses_a_link,
             each_node_warms_its_own_cache_and_the_run_loads_nothing,
             a_rank_ending_after_rank_0_still_has_its_last_records_logged,
             each_node_retires_its_idle_loaders,
             a_nodes_cache_of_another_dataset_is_refused_naming_the_node,
             a_node_whose_data_plane_dies_stops_naming_the_node])
