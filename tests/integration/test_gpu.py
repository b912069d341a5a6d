"""The cuda backend (ctest label `gpu`): against the cpu backend on the same
batches (also with augmentation, on the GPU there), its GPU timers, and its checkpoints. Exits 77 (ctest: skipped) where
the trainer finds no GPU, or the build has no CUDA: then the log line says why.
Everywhere, `trainer.backend: auto` falls back to the cpu backend and
`trainer.backend: cuda` without a GPU stops the run naming the reason."""
import json
import os
import sys
import zp

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  synthetic: {{train_samples: 6400, test_samples: 640, shape: [1, 28, 28], classes: 10}}
loader: {{workers: 2, task_size: 64}}
prefetch: {{batch_size: 64, depth: 2}}
trainer:
  backend: {backend}
  model: {{hidden: [256, 128]}}
  optimizer: {{name: {optimizer}, lr: {lr}}}
  epochs: {epochs}
  log_every_steps: 1
  checkpoint: {{keep: best}}
  debug: {{log_batches: true}}
"""


def up(w, name, backend, optimizer="sgd", lr=0.05, epochs=1, *extra):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, backend=backend, optimizer=optimizer,
                                                lr=lr, epochs=epochs))
    return w.run("up", cfg, *extra)


def trainer_log(w, name):
    return open(os.path.join(w.run_dir(name), "logs", "trainer-0.log")).read()


def step_losses(run_dir):
    return {m["step"]: m["loss"] for m in zp.metrics(run_dir)
            if m.get("event") == "step" and m.get("split") == "train"}


def gpu_present():
    with zp.Workdir() as w:
        rc, out, err = up(w, "probe", "auto", "sgd", 0.05, 1, "trainer.fast_dev_run=true")
        zp.check(rc == 0, err)
        log = trainer_log(w, "probe")
        if "cuda backend:" in log:
            return True
        zp.check("trainer.backend: auto: no GPU (" in log, log)  # auto fell back, and says why
        print("no GPU: " + log.split("auto: no GPU (", 1)[1].split("), so the cpu", 1)[0], flush=True)
        return False


def without_a_gpu_cuda_stops_the_run_and_names_why():
    with zp.Workdir() as w:
        rc, out, err = up(w, "c", "cuda")
        zp.check(rc == 1 and "trainer[0] exited with status 1" in err, err)
        zp.check("trainer.backend: cuda: no GPU to use: " in trainer_log(w, "c"), trainer_log(w, "c"))


def cuda_matches_cpu_after_100_steps():
    with zp.Workdir() as w:
        augment = ("dataset.augment.resized_crop=true", "dataset.augment.crop_padding=2",
                   "dataset.augment.hflip=true")
        uint8 = ("dataset.dtype=uint8",)  # normalised by a kernel on the GPU
        for opt, lr, extra in (("sgd", 0.05, ()), ("adamw", 0.001, ()), ("sgd", 0.05, augment),
                               ("sgd", 0.05, augment + uint8)):
            runs = {}
            for backend in ("cpu", "cuda"):
                name = "%s-%s%s%s" % (opt, backend, "-augment" if augment[0] in extra else "",
                                      "-uint8" if uint8[0] in extra else "")
                rc, out, err = up(w, name, backend, opt, lr, 1, *extra)
                zp.check(rc == 0, err)
                runs[backend] = w.run_dir(name)
            cpu, gpu = step_losses(runs["cpu"]), step_losses(runs["cuda"])
            zp.check(100 in cpu and 100 in gpu, "no step 100: %d steps" % len(gpu))
            rel = abs(gpu[100] - cpu[100]) / abs(cpu[100])
            print("%s: loss at step 100: cpu %.7f cuda %.7f relative error %.2e" %
                  (opt, cpu[100], gpu[100], rel), flush=True)
            zp.check(rel <= 1e-4, "%s: relative error %.2e > 1e-4" % (opt, rel))
            # the same batches in the same order, every sample once
            # the same batches (the pixel digest is the cpu's after augmentation, the cuda's before)
            a, b = ([l.split()[:4] for l in open(os.path.join(r, "batches.log"))]
                    for r in (runs["cpu"], runs["cuda"]))
            zp.check(a == b, "the backends saw other batches")
            e = zp.epoch_ends(runs["cuda"], "train")[-1]
            zp.check(e["samples"] == 6400 and e["distinct"] == 6400, e)
            test_cpu = zp.epoch_ends(runs["cpu"], "test")[-1]
            test_gpu = zp.epoch_ends(runs["cuda"], "test")[-1]
            zp.check(abs(test_cpu["accuracy"] - test_gpu["accuracy"]) <= 2 / 640,
                     (test_cpu, test_gpu))


def gpu_timers_and_checkpoints():
    with zp.Workdir() as w:
        rc, out, err = up(w, "g", "cuda", "sgd", 0.05, 2)
        zp.check(rc == 0, err)
        report = json.load(open(os.path.join(w.run_dir("g"), "report.json")))
        count = {r["region"]: r["count"] for r in report["regions"] if r["stage"] == "trainer"}
        # 100 train batches a epoch (backward), 10 test batches (forward only)
        zp.check(count.get("backward", 0) == 200 and count.get("forward", 0) == 220 and
                 count.get("h2d", 0) == 220, count)
        # the best checkpoint, read back by the cpu eval, gives the run's own test metrics
        rc, out, err = w.run("eval", w.run_dir("g"), "--ckpt", "best")
        zp.check(rc == 0, err)
        ev = json.load(open(os.path.join(w.run_dir("g"), "eval-best.json")))
        best = max(zp.epoch_ends(w.run_dir("g"), "test"), key=lambda m: m["accuracy"])
        zp.check(abs(ev["accuracy"] - best["accuracy"]) <= 1 / 640, (ev["accuracy"], best))


def gpu_count():
    import subprocess
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
    except OSError:
        return 0
    return sum(1 for l in r.stdout.splitlines() if l.startswith("GPU "))


def two_gpus_train_as_cpu_ranks():
    """trainer.gpus: 2 on cuda (NCCL) against 2 cpu ranks (ZeroMQ) on the same
    batches: the same losses within float32 tolerance, every sample once."""
    if gpu_count() < 2:
        print("one GPU: the NCCL check needs two", flush=True)
        return
    with zp.Workdir() as w:
        runs = {}
        for backend in ("cpu", "cuda"):
            name = "ranks-" + backend
            rc, out, err = up(w, name, backend, "sgd", 0.05, 1, "trainer.gpus=2")
            zp.check(rc == 0, err)
            runs[backend] = w.run_dir(name)
        a = zp.epoch_ends(runs["cpu"], "train")[-1]
        b = zp.epoch_ends(runs["cuda"], "train")[-1]
        zp.check(b["samples"] == b["distinct"] == 6400 and b["index_checksum"] == a["index_checksum"], b)
        rel = abs(a["loss"] - b["loss"]) / abs(a["loss"])
        print("2 ranks: epoch loss cpu %.7f cuda %.7f relative error %.2e" % (a["loss"], b["loss"], rel),
              flush=True)
        zp.check(rel <= 1e-4, "relative error %.2e > 1e-4" % rel)
        report = json.load(open(os.path.join(runs["cuda"], "report.json")))
        comm = sum(r["count"] for r in report["regions"] if r["stage"] == "trainer" and r["region"] == "comm")
        zp.check(comm >= 100, "comm region count %d" % comm)


def a_stopped_gpu_rank_is_aborted_within_the_timeout():
    """trainer.gpus: 2 on cuda with rank 1 frozen (SIGSTOP: alive to the
    supervisor, silent to NCCL): rank 0's all-reduce never completes by
    itself; past trainer.comm_timeout_s it aborts the communicator and the run
    stops naming it, instead of hanging until the job's time limit."""
    if gpu_count() < 2:
        print("one GPU: the NCCL abort check needs two", flush=True)
        return
    import signal
    with zp.Workdir() as w:
        cfg = w.write("stuck.yaml", CONFIG.format(name="stuck", backend="cuda", optimizer="sgd",
                                                  lr=0.05, epochs=100))
        p = w.start("up", cfg, "trainer.gpus=2", "trainer.comm_timeout_s=5")
        run = w.run_dir("stuck")
        zp.wait_for(lambda: os.path.exists(os.path.join(run, "metrics.jsonl")) and
                    any(m.get("event") == "step" for m in zp.metrics(run)), 120, "training to start")
        for pid in zp.stage_pids(run):
            cmd = open("/proc/%d/cmdline" % pid, "rb").read()
            if b"trainer\0" in cmd and b"--instance\x001" in cmd:
                os.kill(pid, signal.SIGSTOP)
        out, err = p.communicate(timeout=120)  # a guard against the hang this test is about
        zp.check(p.returncode == 1, "exit %d: %s" % (p.returncode, err[-2000:]))
        log = trainer_log(w, "stuck")
        zp.check("aborting the communicator" in log and "trainer.comm_timeout_s" in log, log[-2000:])


if __name__ == "__main__":
    if not gpu_present():
        zp.main([without_a_gpu_cuda_stops_the_run_and_names_why], exit_code_on_pass=77)
    zp.main([cuda_matches_cpu_after_100_steps, gpu_timers_and_checkpoints, two_gpus_train_as_cpu_ranks,
             a_stopped_gpu_rank_is_aborted_within_the_timeout])
