"""zeus-pipe sweep: a 2x2 grid makes four runs named after their values, and
ends with a table of their final metrics, best first, and a page comparing
them (one test-curve series per run, links to each run's report.html); a bad
value anywhere in the grid is refused before any run starts."""
import os
import re
import zp

CONFIG = zp.SYNTH.format(name="s", train=1200, test=300, cost=0, workers=1, epochs=2)


def table_rows(out):
    lines = out.split("best first:\n", 1)[1].splitlines()
    return [l.split() for l in lines[1:] if l and not l.startswith("(")]


def comparison_page_links_and_draws_every_run(w, names, ranked):
    path = os.path.join(w.path, "runs", "s-sweep.html")
    page = open(path).read()
    links = re.findall(r'<tr class="run"><td>\d+</td><td class="l"><a href="([^"]+)">', page)
    zp.check(links == [n + "/report.html" for n in ranked], "links %s, ranked %s" % (links, ranked))
    for link in links:
        zp.check(os.path.isfile(os.path.join(os.path.dirname(path), link)), "a dead link: " + link)
    for plot in ("test-accuracy", "test-loss"):
        m = re.search(r'<svg id="%s"[^>]*>(.*?)</svg>' % plot, page, re.S)
        zp.check(m, "no %s plot" % plot)
        runs = re.findall(r'<g class="series" data-run="([^"]+)"', m.group(1))
        zp.check(sorted(runs) == names, "%s series %s" % (plot, runs))
        zp.check(m.group(1).count("<circle") == 2 * len(names), "%s: not 2 epochs per run" % plot)


def a_2x2_sweep_makes_four_runs_and_a_ranked_table():
    with zp.Workdir() as w:
        cfg = w.write("s.yaml", CONFIG)
        rc, out, err = w.run("sweep", cfg, "-m", "trainer.optimizer.lr=0.05,0.0001",
                             "prefetch.batch_size=32,64", "trainer.model.hidden=[8]")
        zp.check(rc == 0, err)
        names = sorted("s-lr=%s-batch_size=%d" % (lr, b) for lr in ("0.05", "0.0001") for b in (32, 64))
        runs = sorted(d for d in os.listdir(os.path.join(w.path, "runs")) if os.path.isdir(w.run_dir(d)))
        zp.check(runs == names, runs)
        rows = table_rows(out)
        zp.check(sorted(r[0] for r in rows) == names, rows)
        accs = [float(r[3]) for r in rows]
        zp.check(accs == sorted(accs, reverse=True), "not best first: %s" % accs)
        for r in rows:
            test = zp.epoch_ends(w.run_dir(r[0]), "test")
            zp.check(len(test) == 2 and abs(float(r[3]) - test[-1]["accuracy"]) < 1e-4, (r, test[-1]))
            zp.check(abs(float(r[4]) - test[-1]["loss"]) < 1e-4, (r, test[-1]))
            zp.check(zp.epoch_ends(w.run_dir(r[0]), "train")[0]["samples"] == 1200, r)
        # each run trained with its own values
        steps = {r: zp.epoch_ends(w.run_dir(r), "train")[-1]["step"] for r in names}
        zp.check(steps["s-lr=0.05-batch_size=32"] == 2 * 38 and steps["s-lr=0.05-batch_size=64"] == 2 * 19,
                 steps)
        zp.check(accs[0] > accs[-1], "lr 0.05 and 0.0001 should not tie: %s" % accs)
        zp.check(open(os.path.join(w.path, "runs", "s-sweep.txt")).read().count("\n") == 5, "sweep.txt")
        zp.check("s-sweep.html" in out, out)
        comparison_page_links_and_draws_every_run(w, names, [r[0] for r in rows])


def a_bad_point_is_refused_before_any_run():
    with zp.Workdir() as w:
        cfg = w.write("s.yaml", CONFIG)
        rc, out, err = w.run("sweep", cfg, "trainer.optimizer.lr=0.05,fast", "prefetch.batch_size=32,64")
        zp.check(rc == 2 and "trainer.optimizer.lr" in err, err)
        zp.check(not os.path.exists(os.path.join(w.path, "runs")) or
                 not os.listdir(os.path.join(w.path, "runs")), "a run was started")
        rc, out, err = w.run("sweep", cfg, "trainer.optimizer.lr=0.05")
        zp.check(rc == 2 and "usage: zeus-pipe sweep" in err, "a sweep needs an axis: %s" % err)


if __name__ == "__main__":
    zp.main([a_2x2_sweep_makes_four_runs_and_a_ranked_table, a_bad_point_is_refused_before_any_run])
