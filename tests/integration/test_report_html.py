"""RUN/report.html on a real run, looked at in a real browser: the logger
writes it as the run ends; headless Chromium loads it (no network: the page
needs none), a screenshot of it is not blank and has the plots' colours, and
its DOM holds the plots, one throughput series per stage that ran, and a row
per epoch. `zeus-pipe report RUN --html` writes it again, also for a run
whose events.msgpack is gone (then from metrics.jsonl and stats.jsonl, saying
so). Skipped (77) where Debian's chromium is not installed."""
import os
import re
import shutil
import subprocess
import tempfile
import zp

CONFIG = """
run: {name: page}
seed: 3
dataset:
  source: synthetic
  synthetic: {train_samples: 1024, test_samples: 128, shape: [1, 8, 8], classes: 4}
loader: {workers: 2, task_size: 16}
prefetch: {batch_size: 64, depth: 2}
trainer:
  backend: cpu
  model: {hidden: [16]}
  epochs: 3
  log_every_steps: 4
logger: {stat_interval_ms: 100}
"""

CHROMIUM = shutil.which("chromium")


def chromium(*args):
    """Runs headless Chromium (as root it needs --no-sandbox) with a private
    profile; its stdout. Never longer than 60 s."""
    with tempfile.TemporaryDirectory(prefix="zp-chromium-") as profile:
        p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                            "--user-data-dir=" + profile, "--no-first-run"] + list(args),
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, HOME=profile))
    zp.check(p.returncode == 0, "chromium exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    return p.stdout


def screenshot_is_not_blank(page, png):
    chromium("--screenshot=" + png, "--window-size=1200,3000", "file://" + page)
    from PIL import Image
    img = Image.open(png).convert("RGB")
    small = img.resize((300, 750))
    pixels = list(small.getdata())
    ink = sum(1 for p in pixels if sum(p) < 700)
    colours = {(r // 32, g // 32, b // 32) for r, g, b in pixels}
    zp.check(ink > 0.02 * len(pixels), "the screenshot is nearly blank: %d of %d pixels not white"
             % (ink, len(pixels)))
    zp.check(len(colours) >= 8, "the screenshot has %d colours: no plots drawn?" % len(colours))
    # the stages' series are drawn in the palette's blue, orange, green and red
    for name, want in (("blue", (0x1f, 0x77, 0xb4)), ("orange", (0xff, 0x7f, 0x0e)),
                       ("green", (0x2c, 0xa0, 0x2c)), ("red", (0xd6, 0x27, 0x28))):
        near = sum(1 for p in img.getdata() if all(abs(a - b) < 24 for a, b in zip(p, want)))
        zp.check(near > 50, "no %s series in the screenshot (%d pixels)" % (name, near))


def svg(dom, ident):
    m = re.search(r'<svg id="%s"[^>]*>(.*?)</svg>' % ident, dom, re.S)
    zp.check(m, "no <svg id=%s> in the DOM" % ident)
    return m.group(1)


def dom_has_plots_series_and_epochs(page):
    dom = chromium("--dump-dom", "file://" + page)
    for ident in ("loss", "accuracy", "throughput", "data-wait", "regions"):
        svg(dom, ident)
    stages = re.findall(r'<g class="series" data-stage="([^"]+)"', svg(dom, "throughput"))
    for want in ("loader", "cache", "prefetch", "trainer"):
        zp.check(stages.count(want) == 1, "throughput series %s: %s" % (want, stages))
    zp.check(len(re.findall(r"<polyline", svg(dom, "throughput"))) == len(stages), "a series without a line")
    bars = re.findall(r'<g class="bar" data-label="([^"]+)"', svg(dom, "regions"))
    zp.check("trainer forward" in bars and "loader read" in bars, bars)
    table = re.search(r'<table id="epochs">(.*?)</table>', dom, re.S)
    zp.check(table, "no epoch table")
    epochs = re.findall(r'<tr class="epoch"><td>(\d+)</td>', table.group(1))
    zp.check(epochs == ["1", "2", "3"], "epoch rows %s" % epochs)
    proofs = re.findall(r"ok: every index once", dom)
    zp.check(len(proofs) == 6, "coverage: %d of 6 epoch-splits proven" % len(proofs))
    zp.check("bottleneck" in dom and "<script" not in dom, "no bottleneck sentence, or a script")
    return dom


def a_run_page_renders_with_its_plots_and_epochs():
    if not CHROMIUM:
        print("chromium is not installed (apt-get install chromium): skipped")
        raise SystemExit(77)
    with zp.Workdir() as w:
        cfg = w.write("p.yaml", CONFIG)
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, err)
        d = w.run_dir("page")
        page = os.path.join(d, "report.html")
        zp.check(os.path.getsize(page) < 1 << 20, "report.html is %d bytes" % os.path.getsize(page))
        dom_has_plots_series_and_epochs(page)
        screenshot_is_not_blank(page, os.path.join(w.path, "shot.png"))

        # written again on demand; and without events.msgpack, from the jsonl files
        os.remove(page)
        os.remove(os.path.join(d, "events.msgpack"))
        rc, out, err = w.run("report", "page", "--html")
        zp.check(rc == 0 and out.strip().endswith("runs/page/report.html"), (rc, out, err))
        dom = chromium("--dump-dom", "file://" + page)
        zp.check("events.msgpack is missing: this report is made of metrics.jsonl and stats.jsonl"
                 in dom, "the page does not say what is missing")
        epochs = re.findall(r'<tr class="epoch"><td>(\d+)</td>', dom)
        zp.check(epochs == ["1", "2", "3"], "epoch rows from metrics.jsonl: %s" % epochs)
        stages = re.findall(r'<g class="series" data-stage="([^"]+)"', svg(dom, "throughput"))
        zp.check({"loader", "cache", "prefetch", "trainer"} <= set(stages), stages)
        rc, out, err = w.run("report", "page")
        zp.check(rc == 0 and "events.msgpack is missing" in out, out + err)


if __name__ == "__main__":
    zp.main([a_run_page_renders_with_its_plots_and_epochs])
