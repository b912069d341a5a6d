"""Every JSON output reads as JSON whatever the paths and names in it: a run
whose folder holds a quote, a backslash and a byte that is no UTF-8 (a path is
bytes), and a checkpoint with a quote in its name, give `stat --json`,
report.json, `cache stat --json` and eval's JSON that a
strict parser reads, each naming the path or name as it is (the stray byte as
U+FFFD)."""
import json
import os
import shutil
import subprocess
import time
import zp
from test_ranks import CONFIG

ODD = b'q"b\\s\xff'


def zeus(w, cwd, *args, timeout=240):
    p = subprocess.Popen([zp.BIN.encode()] + [a if isinstance(a, bytes) else a.encode() for a in args],
                         cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    w.procs.append(p)
    return p


def finish(p, timeout=240):
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err.decode(errors="replace")


def parse(what, out):
    """json.loads of bytes decodes them as UTF-8, strictly: a raw 0xff fails as a quote does."""
    try:
        return json.loads(out)
    except ValueError as e:
        raise AssertionError("%s is not JSON (%s): %r" % (what, e, out[:400]))


def json_names_odd_paths_and_names_as_they_are():
    with zp.Workdir() as w:
        cwd = os.path.join(w.path.encode(), ODD)
        os.mkdir(cwd)
        text = CONFIG.format(name="odd", gpus=1, batch=32, train=1025, corrupt=0, epochs=2, cost=4000)
        with open(os.path.join(cwd, b"odd.yaml"), "w") as f:
            f.write(text + "cache: {enabled: true, path: cache}\nlogger: {stat_interval_ms: 200}\n")
        run = os.path.join(cwd, b"runs", b"odd")
        as_text = run.decode(errors="replace")
        up = zeus(w, cwd, "up", "odd.yaml")
        # stat --json while it runs: a row per stage, and the run as it is
        rows = None
        while rows is None and up.poll() is None:
            rc, out, err = finish(zeus(w, cwd, "stat", run, "--json"), 30)
            doc = parse("stat --json", out) if rc == 0 else {}
            rows = doc.get("stages") or None
            time.sleep(0.1)
        zp.check(rows, "no stat --json while the run ran: %r" % (finish(up)[2][-2000:],))
        zp.check(doc["run"] == as_text, "stat --json names the run %r, not %r" % (doc["run"], as_text))
        zp.check({r["stage"] for r in rows} <= {"loader", "cache", "prefetch", "trainer", "logger"}, rows)
        rc, out, err = finish(up)
        zp.check(rc == 0, err)
        rc, out, err = finish(zeus(w, cwd, "report", run, "--json"))
        zp.check(rc == 0, err)
        zp.check(parse("report --json", out)["run"] == "odd", out[:300])
        with open(os.path.join(run, b"report.json"), "rb") as f:
            zp.check(parse("report.json", f.read())["run"] == "odd", "report.json")
        cache = os.path.join(cwd, b"cache")
        rc, out, err = finish(zeus(w, cwd, "cache", "stat", cache, "--json"))
        zp.check(rc == 0, err)
        doc = parse("cache stat --json", out)
        zp.check(doc["path"] == cache.decode(errors="replace") and doc["databases"], out[:300])
        # eval writes the run's absolute path into its config.yaml, which YAML wants in UTF-8
        # (left alone here): it runs where the folder has the quote and backslash alone
        os.rename(cwd, cwd[:-1])
        cwd, run = cwd[:-1], os.path.join(cwd[:-1], b"runs", b"odd")
        ckpts = os.path.join(run, b"checkpoints")
        shutil.copy(os.path.join(ckpts, b"last.ckpt"), os.path.join(ckpts, b'my "pick".ckpt'))
        rc, out, err = finish(zeus(w, cwd, "eval", run, "--ckpt", "all"))
        zp.check(rc == 0, err)
        with open(os.path.join(run, b'eval-my "pick".json'), "rb") as f:
            doc = parse("eval-my \"pick\".json", f.read())
        zp.check(doc["checkpoint"] == 'my "pick"' and doc["samples"] == 200, doc)


if __name__ == "__main__":
    zp.main([json_names_odd_paths_and_names_as_they_are])
