"""zeus_pipe.attach(device="cuda") on a GPU: for the same seed its batches
equal the CPU path's (float32: the same bits; uint8: the CPU's pixels
normalised with the config's dataset.mean/std, as float32 on the device), y
int64 on the device, the same indices, and every batch kept by the loop
(no clone) still holds its values after the slot went back and the ring was
refilled many times. Exits 77 (skipped) where /usr/bin/python3 has no torch
with CUDA, as here."""
import os
import subprocess
import sys
import zp
from test_python import PACKAGE, PYTHON, python_command

MEAN, STD = [0.5, 0.4], [0.25, 0.2]

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  dtype: {dtype}
  mean: {mean}
  std: {std}
  synthetic: {{train_samples: 600, test_samples: 100, shape: [2, 6, 5], classes: 4}}
loader: {{workers: 2, task_size: 20}}
prefetch: {{batch_size: 40, depth: 2, shuffle: true}}
trainer:
  epochs: 1
  command: [{python}, consumer.py, {device}, {name}.pt]
"""

# Keeps every batch (on the GPU without a copy of its own: they must stay
# valid) and saves them on the CPU at the end.
CONSUMER = """
import sys, torch, zeus_pipe
device, out = sys.argv[1], sys.argv[2]
kept = []
with zeus_pipe.attach(device=None if device == "cpu" else device) as zp:
    for name, src in (("train", zp.train), ("test", zp.test)):
        for x, y in src:
            kept.append((name, x if device != "cpu" else x.clone(), y, zp.indices.clone()))
    torch.save([(n, x.device.type, x.cpu(), y.device.type, y.cpu(), i) for n, x, y, i in kept], out)
"""


def run(w, name, dtype, device):
    cfg = w.write(name + ".yaml", CONFIG.format(name=name, dtype=dtype, mean=MEAN, std=STD,
                                                python=python_command(), device=device))
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PACKAGE))
    p = w.start("up", cfg, env=env)
    out, err = p.communicate(timeout=240)
    zp.check(p.returncode == 0, "%s: exit %d:\n%s" % (name, p.returncode, err[-3000:]))
    import torch
    return torch.load(os.path.join(w.path, name + ".pt"))


def the_gpu_path_gives_the_cpu_paths_values(dtype):
    import torch
    with zp.Workdir() as w:
        w.write("consumer.py", CONSUMER)
        cpu, gpu = run(w, "cpu", dtype, "cpu"), run(w, "gpu", dtype, "cuda")
        zp.check(len(cpu) == len(gpu) == 15 + 3, "batches: cpu %d, gpu %d" % (len(cpu), len(gpu)))
        mean = torch.tensor(MEAN).view(1, 2, 1, 1)
        std = torch.tensor(STD).view(1, 2, 1, 1)
        for k, (a, b) in enumerate(zip(cpu, gpu)):
            zp.check(a[0] == b[0] and torch.equal(a[5], b[5]), "batch %d: other indices" % k)
            zp.check(b[1] == b[3] == "cuda", "batch %d: x on %s, y on %s" % (k, b[1], b[3]))
            zp.check(b[2].dtype == torch.float32 and b[4].dtype == torch.int64 and
                     torch.equal(a[4], b[4]), "batch %d: x %s, y %s" % (k, b[2].dtype, b[4].dtype))
            want = a[2] if dtype == "float32" else (a[2].float() / 255 - mean) / std
            same = torch.equal(want, b[2]) if dtype == "float32" else torch.allclose(
                want, b[2], rtol=0, atol=1e-5)
            zp.check(same, "batch %d: pixels differ by up to %g" % (
                k, (want - b[2]).abs().max().item()))


def float32_batches_on_the_gpu_are_the_cpu_paths_bits():
    the_gpu_path_gives_the_cpu_paths_values("float32")


def uint8_batches_are_normalised_on_the_gpu_with_the_configs_mean_and_std():
    the_gpu_path_gives_the_cpu_paths_values("uint8")


if __name__ == "__main__":
    probe = "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"
    if subprocess.run([PYTHON, "-c", probe], capture_output=True).returncode:
        print("SKIP: %s has no torch with CUDA (torch.cuda.is_available() is False)" % PYTHON)
        sys.exit(77)
    zp.main([float32_batches_on_the_gpu_are_the_cpu_paths_bits,
             uint8_batches_are_normalised_on_the_gpu_with_the_configs_mean_and_std])
