"""zeus-pipe installed (`cmake --install BUILD --prefix P`) and the Python
package pip-installed into a virtual environment, used with nothing of the
checkout in sight: P/bin/zeus-pipe runs from its link, a C program compiled
against P/include/zeus_pipe.h and P/lib/libzeuspipe.so consumes a run of the
installed binary, the venv's Python is a trainer.command of it, and a script
in the venv starts the pipeline itself finding zeus-pipe on PATH; every run
proves each epoch exactly once. Exits 77 (skipped) where /usr/bin/python3 has
no torch or no venv module (Debian: python3-venv, python3-pip)."""
import os
import shutil
import subprocess
import sys
import zp
from test_python import PACKAGE, PYTHON

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.dirname(os.path.abspath(zp.BIN))

CONFIG = """
run: {name: %s}
seed: 3
dataset:
  source: synthetic
  synthetic: {train_samples: 400, test_samples: 100, shape: [1, 3, 3], classes: 2}
loader: {workers: 1, task_size: 16}
prefetch: {batch_size: 40}
trainer:
  epochs: 2
%s
"""

SCRIPT = """
import sys, zeus_pipe
assert "site-packages" in zeus_pipe.__file__, zeus_pipe.__file__
kw = dict(config=sys.argv[1]) if len(sys.argv) > 1 else {}
with zeus_pipe.attach(**kw) as zp:
    for epoch in range(2):
        for x, y in zp.train:
            pass
        for x, y in zp.test:
            pass
    print("run", zp.run)
"""


def clean_env(prefix):
    """A user's environment: PATH with P/bin, nothing of the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ZP_BIN", "ZP_LIBRARY", "ZP_RUN", "ZP_RANK")}
    env["PATH"] = os.path.join(prefix, "bin") + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env.update(zp.sanitizer_env())
    return env


def run(argv, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=kw.pop("timeout", 240), **kw)
    zp.check(p.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(argv), p.returncode,
                                                       p.stdout[-2000:], p.stderr[-3000:]))
    return p


def exactly_once(run_dir):
    for split, n in (("train", 400), ("test", 100)):
        ends = [(e["epoch"], e["samples"], e["distinct"], e["index_checksum"])
                for e in zp.epoch_ends(run_dir, split)]
        want = [(k, n, n, zp.index_checksum(range(n))) for k in range(2)]
        zp.check(ends == want, "%s: %s epoch_end records %s, want %s" % (run_dir, split, ends, want))


def installed_binary_library_and_package_work_without_the_checkout():
    with zp.Workdir() as w:
        prefix = os.path.join(w.path, "prefix")
        run(["cmake", "--install", BUILD, "--prefix", prefix])
        zbin = os.path.join(prefix, "bin", "zeus-pipe")
        zp.check(os.path.islink(zbin), "P/bin/zeus-pipe is no link")
        env = clean_env(prefix)
        zp.check("usage" in run([zbin, "--help"], env=env).stdout.lower(), "zeus-pipe --help")

        # a C program against the installed header and library
        example = os.path.join(w.path, "client-example")
        run(["cc", "-std=c11", "-O1", "-I", os.path.join(prefix, "include"),
             os.path.join(HERE, "..", "client_example.c"), "-o", example,
             "-L", os.path.join(prefix, "lib"), "-lzeuspipe",
             "-Wl,-rpath," + os.path.join(prefix, "lib")] +
            (["-fsanitize=address"] if zp.sanitizer_env() else []))
        w.write("c.yaml", CONFIG % ("c", "  command: [%s]" % example))
        run([zbin, "up", "c.yaml"], cwd=w.path, env=env)
        exactly_once(os.path.join(w.path, "runs", "c"))

        # the package pip-installed into a venv, from a copy of python/
        src, venv = os.path.join(w.path, "src"), os.path.join(w.path, "venv")
        shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                     "*.egg-info"))
        run([PYTHON, "-m", "venv", "--system-site-packages", venv])
        vpy = os.path.join(venv, "bin", "python")
        run([vpy, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--quiet", src],
            env=env, timeout=300)
        w.write("script.py", SCRIPT)

        # ... as a trainer.command of the installed zeus-pipe
        w.write("cmd.yaml", CONFIG % ("cmd", "  command: [%s, script.py]" % vpy))
        run([zbin, "up", "cmd.yaml"], cwd=w.path, env=env)
        exactly_once(os.path.join(w.path, "runs", "cmd"))

        # ... and starting the pipeline itself, zeus-pipe found on PATH
        w.write("first.yaml", CONFIG % ("first", ""))
        out = run([vpy, "script.py", "first.yaml"], cwd=w.path, env=env).stdout
        zp.check("run " in out, out)
        exactly_once(out.split("run ", 1)[1].strip())


if __name__ == "__main__":
    for probe in ("import torch", "import venv, ensurepip"):
        if subprocess.run([PYTHON, "-c", probe], capture_output=True).returncode:
            print("SKIP: %s cannot %r (Debian: python3-torch, python3-venv)" % (PYTHON, probe))
            sys.exit(77)
    zp.main([installed_binary_library_and_package_work_without_the_checkout])
