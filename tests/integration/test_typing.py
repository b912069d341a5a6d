"""The Python package as a user's editor and pip see it: Debian's mypy (1.0)
finds nothing in python/zeus_pipe under python/pyproject.toml's [tool.mypy]
(strict); a wheel built from python/ holds every module, py.typed and the
numpy requirement; a program checked against that wheel's files, as a user's
mypy checks it, is flagged at exactly the lines that misuse the API (and its
correct lines are not), and the same program without py.typed gets mypy's
"missing library stubs or py.typed marker" instead, which proves the marker
is what carries the types; `import zeus_pipe` loads neither numpy nor torch.
Without mypy in /usr/bin/python3 (Debian: mypy, which scripts/deps.sh
installs) the other tests run and the script exits 77 (skipped)."""
import atexit
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

import zp

PYTHON = sys.executable
PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "python"))
CACHE = tempfile.mkdtemp(prefix="zp-mypy-")  # one mypy cache for every run: torch is analysed once
atexit.register(shutil.rmtree, CACHE, True)

# A user's program. A line ending in `# error: [CODE]` must get mypy's error
# CODE, and no other line an error; `reveal_type` lines must reveal the type
# after `# reveals:`.
PROGRAM = '''\
import torch
import zeus_pipe

with zeus_pipe.attach(config="c.yaml", overrides={"trainer.epochs": 3}, device="cuda") as zp:
    reveal_type(zp)  # reveals: zeus_pipe.client.Client
    for epoch in range(zp.epoch, 3):
        for x, y in zp.train:
            loss = x.float().mean() + y.float().mean()
        zp.log("test_epoch", epoch=epoch, loss=torch.tensor(0.5), accuracy=0.9)
    saved: dict[str, int] = zp.state_dict()
    zp.load_state_dict(saved)
    count: int = len(zp.train) + zp.train.batch_size + zp.test.samples + zp.step + zp.classes
    reveal_type(zp.indices)  # reveals: torch._tensor.Tensor
    reveal_type(zp.train.epochs)  # reveals: Union[builtins.int, None]
    with zp.region("forward"):
        pass
    seed: int = zeus_pipe.sample_seed(1, "train", 0, 5)
    try:
        zp.close()
    except zeus_pipe.ZeusPipeError as e:
        print(str(e))

bad = zeus_pipe.attach(rank="0")  # error: [arg-type]
bad.train.batch_size + "x"  # error: [operator]
bad.load_state_dict({"epoch": "3"})  # error: [dict-item]
bad.state_dict()["epoch"].upper()  # error: [attr-defined]
bad.trian  # error: [attr-defined]
bad.log("step", loss="low")  # error: [arg-type]
last: int = bad.train.epochs - 1  # error: [operator]
'''

REPORT = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): (?P<kind>error|note): (?P<text>.*?)"
                    r"(?:  \[(?P<code>[a-z-]+)\])?$")


def have_mypy():
    return subprocess.run([PYTHON, "-c", "import mypy.api"], capture_output=True).returncode == 0


def mypy(args, cwd, env=None):
    """(exit status, [report lines]) of `python3 -m mypy ARGS`."""
    p = subprocess.run([PYTHON, "-m", "mypy", "--cache-dir", CACHE, "--show-error-codes"] + args,
                       cwd=cwd, env=env, capture_output=True, text=True, timeout=240)
    zp.check(p.returncode in (0, 1), "mypy %s: exit %d (a crash, or a bad config):\n%s%s" % (
        " ".join(args), p.returncode, p.stdout[-3000:], p.stderr[-3000:]))
    return p.returncode, p.stdout.splitlines()


def source():
    """A copy of python/ without build output: pip builds in the tree it is given."""
    w = tempfile.mkdtemp(prefix="zp-typing-")
    atexit.register(shutil.rmtree, w, True)
    src = os.path.join(w, "src")
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                 "*.egg-info", ".mypy_cache"))
    return w, src


def wheel():
    """The wheel pip builds from python/ (offline), built once: its path."""
    if not hasattr(wheel, "path"):
        w, src = source()
        p = subprocess.run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--no-index",
                            "--no-build-isolation", "--quiet", "--wheel-dir", w, src],
                           capture_output=True, text=True, timeout=240)
        zp.check(p.returncode == 0, "pip wheel %s: exit %d\n%s%s"
                 % (src, p.returncode, p.stdout[-2000:], p.stderr[-3000:]))
        found = glob.glob(os.path.join(w, "zeus_pipe-*.whl"))
        zp.check(len(found) == 1, "pip wheel made %s, want one zeus_pipe wheel" % found)
        wheel.path = found[0]
    return wheel.path


def the_package_passes_mypy_strict_with_its_config():
    rc, out = mypy(["--config-file", "pyproject.toml", "zeus_pipe"], cwd=PACKAGE)
    zp.check(rc == 0 and out and out[-1].startswith("Success: no issues found"),
             "mypy on python/zeus_pipe (python/pyproject.toml's [tool.mypy]):\n" + "\n".join(out))
    modules = sorted(f for f in os.listdir(os.path.join(PACKAGE, "zeus_pipe")) if f.endswith(".py"))
    zp.check(out[-1] == "Success: no issues found in %d source files" % len(modules),
             "mypy checked other files than the package's %d modules %s: %s"
             % (len(modules), modules, out[-1]))


def the_wheel_holds_every_module_py_typed_and_needs_numpy():
    with zipfile.ZipFile(wheel()) as z:
        names = set(z.namelist())
        meta = next(z.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    want = {"zeus_pipe/" + f for f in os.listdir(os.path.join(PACKAGE, "zeus_pipe"))
            if f.endswith(".py") or f == "py.typed"}
    zp.check("zeus_pipe/py.typed" in want, "python/zeus_pipe/py.typed is missing")
    zp.check(want <= names, "the wheel lacks %s (python/pyproject.toml's package-data?)"
             % sorted(want - names))
    zp.check(re.search(r"^Requires-Dist: numpy\b", meta, re.M),
             "the wheel's METADATA does not require numpy:\n" + meta)


def expected(program):
    """{line: error code} and {line: revealed type} that PROGRAM's comments ask for."""
    errors, reveals = {}, {}
    for n, line in enumerate(program.split("\n"), 1):
        m = re.search(r"# error: \[([a-z-]+)\]$", line)
        if m:
            errors[n] = m.group(1)
        m = re.search(r"# reveals: (.+)$", line)
        if m:
            reveals[n] = m.group(1)
    return errors, reveals


def check_program(site):
    """mypy's errors and notes on PROGRAM, zeus_pipe found in `site` as an
    installed package (PYTHONPATH: mypy wants py.typed there), with no
    configuration but mypy's defaults."""
    w = tempfile.mkdtemp(prefix="zp-program-")
    atexit.register(shutil.rmtree, w, True)
    with open(os.path.join(w, "mypy.ini"), "w") as f:
        f.write("[mypy]\n")
    with open(os.path.join(w, "program.py"), "w") as f:
        f.write(PROGRAM)
    env = {k: v for k, v in os.environ.items() if k not in ("MYPYPATH", "PYTHONPATH")}
    env["PYTHONPATH"] = site
    _, out = mypy(["--config-file", "mypy.ini", "program.py"], cwd=w, env=env)
    reports = [REPORT.match(line) for line in out]
    return [m for m in reports if m and m.group("file") == "program.py"], out


def a_program_misusing_the_api_is_flagged_through_py_typed():
    site = tempfile.mkdtemp(prefix="zp-site-")
    atexit.register(shutil.rmtree, site, True)
    with zipfile.ZipFile(wheel()) as z:
        z.extractall(site)
    errors, reveals = expected(PROGRAM)
    zp.check(len(errors) == 7 and len(reveals) == 3,
             "PROGRAM's comments: %s %s" % (errors, reveals))

    found, out = check_program(site)
    got = {int(m.group("line")): m.group("code") for m in found if m.group("kind") == "error"}
    zp.check(got == errors, "mypy's errors (line: code) %s, want %s:\n%s"
             % (sorted(got.items()), sorted(errors.items()), "\n".join(out)))
    seen = {int(m.group("line")): m.group("text") for m in found if m.group("kind") == "note"}
    for n, want in reveals.items():
        zp.check(seen.get(n) == 'Revealed type is "%s"' % want,
                 "line %d: %s, want the revealed type %s:\n%s"
                 % (n, seen.get(n), want, "\n".join(out)))

    os.unlink(os.path.join(site, "zeus_pipe", "py.typed"))
    found, out = check_program(site)
    untyped = [m for m in found if m.group("kind") == "error" and m.group("code") == "import"
               and "missing library stubs or py.typed marker" in m.group("text")]
    zp.check(untyped, "without py.typed mypy should skip zeus_pipe (an [import] error), got:\n"
             + "\n".join(out))
    zp.check(not any(m.group("code") == "arg-type" for m in found),
             "without py.typed mypy still checked the calls:\n" + "\n".join(out))


def importing_the_package_loads_neither_numpy_nor_torch():
    code = ("import sys; sys.path.insert(0, %r); import zeus_pipe; "
            "print(sorted(m for m in ('numpy', 'torch') if m in sys.modules)); "
            "print(sorted(zeus_pipe.__all__))" % PACKAGE)
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    zp.check(p.returncode == 0, "import zeus_pipe: exit %d\n%s" % (p.returncode, p.stderr))
    loaded, names = p.stdout.splitlines()
    zp.check(loaded == "[]", "import zeus_pipe loaded %s" % loaded)
    zp.check(names == str(sorted(["attach", "Client", "Source", "ZeusPipeError", "sample_seed"])),
             "zeus_pipe.__all__: %s" % names)


if __name__ == "__main__":
    without = [the_wheel_holds_every_module_py_typed_and_needs_numpy,
               importing_the_package_loads_neither_numpy_nor_torch]
    if not have_mypy():
        print("SKIP: %s has no mypy (Debian: mypy, which scripts/deps.sh installs); "
              "the tests without it:" % PYTHON)
        zp.main(without, exit_code_on_pass=77)
    zp.main([the_package_passes_mypy_strict_with_its_config,
             a_program_misusing_the_api_is_flagged_through_py_typed] + without)
