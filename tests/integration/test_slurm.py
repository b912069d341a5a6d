"""Slurm: `srun zeus-pipe up CONFIG` starts one task a rank. The tasks here are
real `zeus-pipe up` processes on this host with the SLURM_* variables srun
sets: two tasks of one node, so rank 1 uses its node's data plane (rank 0's
cache stage and loaders, over ipc, and the node's LMDB itself) while events
and the ranks' sum take the tcp hop (CURVE) that nodes use. Two tasks with
batches of B train exactly as one trainer with batches of 2 x B, and each
sample is loaded once; a task whose config differs, a rank 0 that never comes,
a rendezvous value longer than its field (refused, never cut) and a client
without the job's key are each named and refused. Each socket lets in its
own keys: a loader's key gets no further than the loaders' port, and a rank
is the key it holds, whatever routing id its peer sends.
test_nodes.py runs tasks on separate nodes (network namespaces)."""
import ctypes
import json
import os
import struct
import time
import zp
from test_ranks import CONFIG, records, same_training

PORT = 18000 + (os.getpid() % 400) * 4


def config(w, name, batch, extra=""):
    text = CONFIG.format(name=name, gpus=1, batch=batch, train=1025, corrupt=0, epochs=2, cost=0)
    text += 'transport: {bind: "127.0.0.1:%d"}\ncache: {enabled: true, path: cache-%s}\n' % (PORT, name)
    return w.write(name + ".yaml", text + extra)


def task(w, rank, ntasks, cfg, *over, job="4242"):
    env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_NTASKS=str(ntasks), SLURM_LOCALID=str(rank),
               SLURM_NODELIST="localhost", SLURM_JOB_ID=job, SLURM_STEP_ID="0")
    env.pop("SLURMD_NODENAME", None)
    return w.start("up", cfg, *over, env=env)


def finish(p, timeout=240):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, err


def stats_of(run_dir, stage):
    """The last stats record of each instance of `stage`."""
    last = {}
    with open(os.path.join(run_dir, "stats.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("stage") == stage:
                last[r["instance"]] = r
    return last


def two_tasks_train_as_one_trainer_of_both_batches():
    with zp.Workdir() as w:
        one = config(w, "one", 64)
        rc, out, err = w.run("up", one)
        zp.check(rc == 0, err)
        two = config(w, "two", 32)
        r1 = task(w, 1, 2, two)  # before rank 0: it waits for the rendezvous
        time.sleep(0.3)
        r0 = task(w, 0, 2, two)
        rc0, err0 = finish(r0)
        rc1, err1 = finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        run, rank1 = w.run_dir("two"), os.path.join(w.run_dir("two"), "rank-1")
        same_training(w.run_dir("one"), run, "2 Slurm tasks")
        ends = zp.epoch_ends(run, "train")
        zp.check(all(e["samples"] == e["distinct"] == 1025 for e in ends), ends)
        for path, want in ((os.path.join(run, "batches.log"), 34), (os.path.join(rank1, "batches-rank1.log"), 32)):
            n = sum(1 for _ in open(path))
            zp.check(n == want, "%s: %d batches, expected %d" % (path, n, want))
        # one node, one data plane: rank 0's task runs the node's loaders and cache stage, and
        # rank 1's events reach rank 0's logger over tcp
        loaders = stats_of(run, "loader")
        zp.check(loaders and all(i < 256 for i in loaders), "loaders of rank 1: %r" % sorted(loaders))
        zp.check(sorted(stats_of(run, "cache")) == [0], "cache stages: %r" % sorted(stats_of(run, "cache")))
        zp.check(not os.path.exists(os.path.join(rank1, "logs", "cache-1.log")), "rank 1 ran a cache stage")
        # every sample loaded once: in epoch 2 rank 1 read its hits from the node's LMDB itself
        loaded = sum(r["total_items"] for r in loaders.values())
        zp.check(loaded == 1025 + 200, "loaders made %d samples for 2 epochs of 1225" % loaded)
        hits = [r for r in zp.metrics(run) if r.get("event") == "cache" and r["instance"] == 1
                and r["split"] == "train" and r["epoch"] == 1]
        zp.check(hits and all(r["hits"] > 0 for r in hits), "rank 1's epoch-2 cache records: %r" % hits)
        trainers = stats_of(run, "trainer")
        zp.check(set(trainers) == {0, 1}, "trainer stats from ranks %r" % sorted(trainers))
        zp.check(not [f for f in os.listdir(os.path.join(w.path, "runs")) if f.startswith(".slurm-")],
                 "the rendezvous file outlived the run")
        zp.check(open(os.path.join(run, "config.yaml")).read() == open(os.path.join(rank1, "config.yaml")).read(),
                 "rank 1 ran another config")


def a_task_with_another_config_is_refused_and_rank_0_names_it():
    with zp.Workdir() as w:
        cfg = config(w, "odd", 32, "")
        r0 = task(w, 0, 2, cfg, "trainer.comm_timeout_s=4", job="5151")
        r1 = task(w, 1, 2, cfg, "trainer.comm_timeout_s=4", "trainer.optimizer.lr=0.02", job="5151")
        rc1, err1 = finish(r1, 60)
        zp.check(rc1 == 2 and "differs from rank 0's" in err1 and "lr: 0.02" in err1, "rank 1 exit %s: %s" % (rc1, err1))
        rc0, err0 = finish(r0, 60)
        zp.check(rc0 == 1, "rank 0 exit %s: %s" % (rc0, err0))
        log = open(os.path.join(w.run_dir("odd"), "logs", "trainer-0.log")).read()
        zp.check("rank 1" in log, "rank 0's trainer does not name the missing rank:\n" + log[-2000:])


def a_rank_whose_rank_0_never_comes_says_so():
    with zp.Workdir() as w:
        cfg = config(w, "alone", 32)
        r1 = task(w, 1, 2, cfg, "trainer.comm_timeout_s=1", job="6161")
        rc1, err1 = finish(r1, 60)
        zp.check(rc1 == 1 and "no word from rank 0" in err1 and "filesystem every node sees" in err1, err1)
        zp.check(not os.path.exists(os.path.join(w.run_dir("alone"), "rank-1")), "rank 1 made a run directory")
        # a bind without a port leaves no room for the ranks' ports: refused before anything starts
        rc, err = finish(task(w, 0, 2, cfg, "transport.bind=0.0.0.0", job="6162"), 30)
        zp.check(rc == 2 and "transport.bind" in err and "PORT 1..65532" in err, err)


def a_rendezvous_value_longer_than_its_field_is_refused_not_cut():
    with zp.Workdir() as w:
        cfg = config(w, "long", 32)
        os.makedirs(os.path.join(w.path, "runs"))
        bind = "127.0.0.1:%d" % PORT
        for job, key, lines in (("7171", "host", ["run /tmp/x", "host " + "h" * 300, "bind " + bind]),
                                ("7172", "run", ["run /" + "r" * 6000, "host h", "bind " + bind])):
            w.write(os.path.join("runs", ".slurm-%s.0" % job), "\n".join(lines) + "\n")
            rc, err = finish(task(w, 1, 2, cfg, "trainer.comm_timeout_s=5", job=job), 60)
            zp.check(rc == 2 and "the value of '%s' is longer than" % key in err,
                     "job %s: exit %s: %s" % (job, rc, err))
        zp.check(not os.path.exists(os.path.join(w.run_dir("long"), "rank-1")), "rank 1 made a run directory")


def a_client_without_the_jobs_key_is_refused():
    with zp.Workdir() as w:
        cfg = config(w, "guarded", 32, "")
        # slow loaders keep the run alive while a stranger knocks on the fetch port
        r0 = task(w, 0, 2, cfg, "dataset.synthetic.cost_us=3000", job="7171")
        r1 = task(w, 1, 2, cfg, "dataset.synthetic.cost_us=3000", job="7171")
        run = w.run_dir("guarded")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "server.pub")), 30, "rank 0's key")
        rc, out, err = w.run("keygen", "stranger")
        zp.check(rc == 0, err)
        stranger = w.start("loader", "--connect", "127.0.0.1:%d" % PORT, "--server-key",
                           os.path.join(run, "server.pub"), "--key", "stranger.key", cfg)
        cache_log = os.path.join(run, "logs", "cache-0.log")
        zp.wait_for(lambda: "refused a peer from 127.0.0.1" in zp.text(cache_log), 30, "the refusal")
        stranger.kill()
        stranger.wait()
        rc0, err0 = finish(r0)
        rc1, err1 = finish(r1)
        zp.check(rc0 == 0 and rc1 == 0, "rank 0 exit %s:\n%s\nrank 1 exit %s:\n%s" % (rc0, err0, rc1, err1))
        ends = zp.epoch_ends(run, "train")
        zp.check(len(ends) == 2 and all(e["samples"] == e["distinct"] == 1025 for e in ends), ends)


class CurvePeer:
    """A DEALER of the system's libzmq (through ctypes: the tests use the
    standard library only) connected over tcp with CURVE as `pub`/`sec`, under
    the routing id it chooses: any peer that knows a port and holds a key."""
    DEALER, ROUTING_ID, LINGER, SNDMORE = 5, 5, 17, 2
    CURVE_PUBLICKEY, CURVE_SECRETKEY, CURVE_SERVERKEY = 48, 49, 50
    lib = None

    def __init__(self, port, server_pub, pub, sec, routing_id):
        if CurvePeer.lib is None:
            z = CurvePeer.lib = ctypes.CDLL("libzmq.so.5")
            z.zmq_ctx_new.restype = z.zmq_socket.restype = ctypes.c_void_p
            z.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
            z.zmq_setsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
            z.zmq_connect.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            z.zmq_send.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
            z.zmq_close.argtypes = z.zmq_ctx_term.argtypes = [ctypes.c_void_p]
        z = self.z = CurvePeer.lib
        self.ctx = z.zmq_ctx_new()
        self.sock = z.zmq_socket(self.ctx, self.DEALER)
        opts = [(self.LINGER, struct.pack("i", 0)), (self.ROUTING_ID, routing_id),
                (self.CURVE_SERVERKEY, server_pub), (self.CURVE_PUBLICKEY, pub), (self.CURVE_SECRETKEY, sec)]
        for opt, val in opts:
            zp.check(z.zmq_setsockopt(self.sock, opt, val, len(val)) == 0, "zmq_setsockopt %d" % opt)
        zp.check(z.zmq_connect(self.sock, b"tcp://127.0.0.1:%d" % port) == 0, "zmq_connect %d" % port)

    def send(self, frames):
        for i, f in enumerate(frames):
            zp.check(self.z.zmq_send(self.sock, f, len(f), self.SNDMORE if i < len(frames) - 1 else 0) == len(f),
                     "zmq_send")

    def close(self):
        self.z.zmq_close(self.sock)
        self.z.zmq_ctx_term(self.ctx)


def reduce_of_one_value(seq):
    """A REDUCE {v: 1, t: reduce, id: seq, n: 1, elems: 1} (msgpack by hand) and its two frames."""
    header = b"\x85\xa1v\x01\xa1t\xa6reduce\xa2id" + bytes([seq]) + b"\xa1n\x01\xa5elems\x01"
    return [header, struct.pack("<f", 1.0), struct.pack("<d", 1.0)]


def a_loader_key_is_refused_on_the_ranks_sockets_and_a_rank_is_its_key():
    with zp.Workdir() as w:
        keys = os.path.join(w.path, "keys")
        os.mkdir(keys)
        rc, out, err = w.run("keygen", "hostb")
        zp.check(rc == 0, err)
        os.rename(os.path.join(w.path, "hostb.pub"), os.path.join(keys, "hostb.pub"))
        lines = open(os.path.join(w.path, "hostb.key")).read().split()
        hostb_pub, hostb_sec = lines[1].encode(), lines[3].encode()
        cfg = config(w, "keyed", 32, "")
        # rank 0 of 3, alone: its trainer waits in the first sum for ranks 1 and 2, which never come
        r0 = task(w, 0, 3, cfg, "transport.allowed_keys=" + keys, "trainer.comm_timeout_s=120", job="9191")
        run = w.run_dir("keyed")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "ranks.pub")), 30, "rank 0's keys")
        server_pub = open(os.path.join(run, "server.pub")).read().strip().encode()
        # hostb's key is a loader's: let in where loaders connect ...
        loader = w.start("loader", "--connect", "127.0.0.1:%d" % PORT, "--server-key",
                         os.path.join(run, "server.pub"), "--key", "hostb.key", cfg)
        cache_log = os.path.join(run, "logs", "cache-0.log")
        zp.wait_for(lambda: "connected over tcp" in zp.text(cache_log), 60, "hostb's loader")
        # ... and nowhere else: the logger's counters and events, the ranks' sum (trainer)
        logs = {PORT + 1: os.path.join(run, "logs", "logger-0.log"), PORT + 2: os.path.join(run, "logs", "logger-0.log"),
                PORT + 3: os.path.join(run, "logs", "trainer-0.log")}
        peers = [CurvePeer(port, server_pub, hostb_pub, hostb_sec, b"1") for port in logs]
        for p in peers:
            p.send(reduce_of_one_value(0))
        refusal = "tcp ranks: refused a peer from 127.0.0.1 with key %s" % hostb_pub.decode()
        for port, log in logs.items():
            zp.wait_for(lambda: refusal in zp.text(log), 60,
                        "the refusal of hostb's key on port %d in %s" % (port, os.path.basename(log)))
        # rank 2's key, under the routing id "1": rank 0 takes its word for nothing but the key
        rank2 = [l.split() for l in open(os.path.join(run, "ranks.key")) if l.startswith("rank 2 ")][0]
        impostor = CurvePeer(PORT + 3, server_pub, rank2[3].encode(), rank2[5].encode(), b"1")
        impostor.send(reduce_of_one_value(0))
        rc0, err0 = finish(r0, 180)
        for p in peers + [impostor]:
            p.close()
        log = open(logs[PORT + 3]).read()
        zp.check(rc0 == 1 and "sum 0 of the trainer ranks: rank 2 sent reduce 0 of 1 values" in log,
                 "rank 0 exit %s: %s\n%s" % (rc0, err0, log[-3000:]))
        zp.check("rank 1 sent" not in log, log[-3000:])
        loader.kill()
        loader.wait()


def the_other_ranks_stop_when_rank_0_is_brought_down():
    with zp.Workdir() as w:
        cfg = config(w, "downed", 32, "")
        r0 = task(w, 0, 2, cfg, "dataset.synthetic.cost_us=3000", "trainer.epochs=20", job="8181")
        r1 = task(w, 1, 2, cfg, "dataset.synthetic.cost_us=3000", "trainer.epochs=20", job="8181")
        run = w.run_dir("downed")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "rank-1", "batches-rank1.log")), 60, "rank 1 training")
        rc, out, err = w.run("down", run)
        zp.check(rc == 0, err)
        rc0, err0 = finish(r0, 60)
        zp.check(rc0 == 3, "rank 0 exit %s after down: %s" % (rc0, err0))
        # after the 10 s grace, long before trainer.comm_timeout_s (300 s) would name rank 0
        rc1, err1 = finish(r1, 60)
        zp.check(rc1 == 1 and "rank 0's run has ended" in err1, "rank 1 exit %s: %s" % (rc1, err1))


if __name__ == "__main__":
    zp.main([two_tasks_train_as_one_trainer_of_both_batches,
             a_task_with_another_config_is_refused_and_rank_0_names_it,
             a_rank_whose_rank_0_never_comes_says_so,
             a_rendezvous_value_longer_than_its_field_is_refused_not_cut,
             a_client_without_the_jobs_key_is_refused,
             a_loader_key_is_refused_on_the_ranks_sockets_and_a_rank_is_its_key,
             the_other_ranks_stop_when_rank_0_is_brought_down])
