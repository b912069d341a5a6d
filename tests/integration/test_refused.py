"""Loaders whose samples cannot be used are refused, and the run completes on
the good ones with every sample exactly once: a remote loader of another
config (another shape, or only another dataset.mean) is refused at its first
READY, before any task reaches it, and exits with status 2 saying why; a
loader that answers a task with samples that do not match it is refused, and
that task goes back to the queue at once instead of staying with it. And when
no loader delivers at all (every one stopped), the prefetch does not wait
forever: past prefetch.fetch_timeout_s it names the batch and samples it
waits for, and the run stops."""
import os
import re
import signal
import struct
import zp

CONFIG = """
run: {{name: {name}}}
seed: 4
dataset:
  source: synthetic
  synthetic: {{train_samples: 3000, test_samples: 300, shape: {shape}, classes: 4, cost_us: 300}}
  mean: [{mean}]
{transport}
loader: {{workers: 1, task_size: 16, heartbeat_ms: 200}}
prefetch: {{batch_size: 64}}
trainer: {{backend: cpu, model: {{hidden: [16]}}, epochs: 2}}
"""


def exact_coverage(run):
    for split, n in (("train", 3000), ("test", 300)):
        ends = zp.epoch_ends(run, split)
        zp.check(len(ends) == 2, "%s epochs: %r" % (split, ends))
        for e in ends:
            zp.check(e["samples"] == n == e["distinct"] and
                     e["index_checksum"] == zp.index_checksum(range(n)), e)


def cache_log(run):
    with open(os.path.join(run, "logs", "cache-0.log")) as f:
        return f.read()


def remote_loaders_of_another_config_are_refused_before_any_task():
    with zp.Workdir() as w:
        port = 18100 + os.getpid() % 300
        tcp = '''transport: {kind: tcp, bind: "127.0.0.1:%d", allowed_keys: keys}''' % port
        os.makedirs(os.path.join(w.path, "keys"))
        rc, out, err = w.run("keygen", "keys/far")
        zp.check(rc == 0, err)
        cfg = w.write("run.yaml", CONFIG.format(name="run", shape="[1, 8, 8]", mean="0.5",
                                                transport=tcp))
        other_shape = w.write("shape.yaml", CONFIG.format(name="run", shape="[1, 8, 9]", mean="0.5",
                                                          transport=tcp))
        other_mean = w.write("mean.yaml", CONFIG.format(name="run", shape="[1, 8, 8]", mean="0.4",
                                                        transport=tcp))
        up = w.start("up", cfg)
        run = w.run_dir("run")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "logs", "cache-0.log")) and
                    "remote loaders connect" in cache_log(run), 30, "the cache stage on tcp")
        common = ["loader", "--connect", "127.0.0.1:%d" % port, "--server-key",
                  os.path.join(run, "server.pub"), "--key", "keys/far.key"]
        bad = [w.start(*common, c) for c in (other_shape, other_mean)]
        for p in bad:
            out, err = p.communicate(timeout=60)
            zp.check(p.returncode == 2, "a refused loader exited %d:\n%s" % (p.returncode, err[-2000:]))
            zp.check("refused by the cache stage" in err and "fingerprint" in err and
                     "give this loader the run's config" in err, err[-2000:])
            zp.check("stopping: loaded 0 samples" in err, "a refused loader loaded samples:\n" + err[-2000:])
        out, err = up.communicate(timeout=120)
        zp.check(up.returncode == 0, "exit %d\n%s" % (up.returncode, err[-2000:]))
        log = cache_log(run)
        # A loader that hears nothing for heartbeat_ms x liveness (a slow
        # machine) reconnects and is refused again: count fingerprints, not lines.
        refusals = re.findall(r"refused, (\d+) task\(s\) re-queued: its dataset and transform "
                              r"fingerprint ([0-9a-f]+)", log)
        zp.check(len({fp for _, fp in refusals}) == 2 and all(n == "0" for n, _ in refusals),
                 log[-3000:])
        exact_coverage(run)


def a_loader_whose_samples_do_not_match_its_task_is_refused_and_the_task_requeued():
    with zp.Workdir() as w:
        cfg = w.write("run.yaml", CONFIG.format(name="fake", shape="[1, 8, 8]", mean="0.5", transport=""))
        up = w.start("up", cfg)
        run = w.run_dir("fake")
        log = zp.wait_for(lambda: os.path.exists(os.path.join(run, "logs", "cache-0.log")) and
                          "loaders must offer fingerprint" in cache_log(run) and cache_log(run), 30,
                          "the cache stage")
        fp = int(log.split("loaders must offer fingerprint ")[1].split()[0], 16)
        # a loader that takes one task and answers it with the indices of another
        peer = zp.Zmtp(os.path.join(run, "sock", "work.ipc"), b"fake-loader")
        peer.send([zp.mp_pack({"v": 1, "t": "ready", "credit": 1, "fp": fp})])
        while True:
            frames = peer.recv()
            head = zp.mp_unpack(frames[0])
            if head["t"] == "task":
                break
        n = head["n"]
        wrong = struct.pack("<%dI" % n, *[(i + 1) % 3000 for i in struct.unpack("<%dI" % n, frames[1])])
        peer.send([zp.mp_pack({"v": 1, "t": "samples", "id": head["id"], "split": head["split"], "n": n,
                               "elems": 64}), wrong, b"\0" * 4 * n, b"\0" * 4 * 64 * n])
        while True:
            head = zp.mp_unpack(peer.recv()[0])
            if head["t"] == "refused":
                break
        zp.check("do not match task" in head["error"], head)
        # it keeps sending heartbeats and READY: no task reaches it any more
        peer.send([zp.mp_pack({"v": 1, "t": "ready", "credit": 4, "fp": fp})])
        out, err = up.communicate(timeout=120)
        zp.check(up.returncode == 0, "exit %d\n%s" % (up.returncode, err[-2000:]))
        log = cache_log(run)
        zp.check("loader 1 refused, 1 task(s) re-queued: samples that do not match task" in log or
                 "loader 0 refused, 1 task(s) re-queued: samples that do not match task" in log, log[-3000:])
        peer.close()
        exact_coverage(run)


def a_run_whose_loaders_all_stop_names_the_batch_it_waits_for():
    with zp.Workdir() as w:
        cfg = w.write("run.yaml", CONFIG.format(name="stuck", shape="[1, 8, 8]", mean="0.5", transport=""))
        p = w.start("up", cfg, "prefetch.fetch_timeout_s=2", "trainer.epochs=50")
        run = w.run_dir("stuck")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 30, "training to start")
        for pid in zp.stage_pids(run):
            if b"loader\0" in open("/proc/%d/cmdline" % pid, "rb").read():
                os.kill(pid, signal.SIGSTOP)  # alive to the supervisor, silent to the cache stage
        out, err = p.communicate(timeout=120)  # a guard against the hang this test is about
        zp.check(p.returncode == 1, "exit %d:\n%s" % (p.returncode, err[-2000:]))
        zp.check("prefetch[0] exited with status 1" in err, err[-2000:])
        log = open(os.path.join(run, "logs", "prefetch-0.log")).read()
        # which batch depends on how far training got before the loaders stopped
        zp.check("not answered by the cache stage for 2 s (prefetch.fetch_timeout_s)" in log and
                 re.search(r" epoch \d+, batch \d+ of \d+: ", log) and "samples (sample " in log,
                 log[-2000:])


if __name__ == "__main__":
    zp.main([remote_loaders_of_another_config_are_refused_before_any_task,
             a_loader_whose_samples_do_not_match_its_task_is_refused_and_the_task_requeued,
             a_run_whose_loaders_all_stop_names_the_batch_it_waits_for])
