"""A user's program as the trainer, through the client library: the example
program (tests/client_example.c, linked with libzeuspipe.so and nothing but
<zeus_pipe.h>) runs as trainer.command and consumes every batch of a real
pipeline. Its epoch records carry the same coverage proof as the built-in
trainer's for the same seed (exactly once, same order), the program's lines
reach its log, and the report counts its wait for data as the trainer's."""
import json
import os
import zp

EXAMPLE = os.path.join(os.path.dirname(zp.BIN), "zp-client-example")

CONFIG = """
run: {{name: {name}}}
seed: 11
dataset:
  source: synthetic
  synthetic: {{train_samples: 3000, test_samples: 500, shape: [1, 8, 8], classes: 4}}
loader: {{workers: 2, task_size: 32}}
prefetch: {{batch_size: 64, depth: 2, shuffle: true}}
trainer:
  epochs: 2
{trainer}
"""


def proofs(run):
    """(split, epoch) -> (samples, distinct, index checksum, order digest) of every epoch_end."""
    out = {}
    for r in zp.metrics(run):
        if r.get("event") == "epoch_end":
            out[(r["split"], r["epoch"])] = (r["samples"], r["distinct"], r["index_checksum"],
                                             r["order_digest"], r["expected_samples"])
    return out


def the_example_consumes_every_batch_exactly_once_as_the_built_in_trainer_would():
    with zp.Workdir() as w:
        builtin = w.write("builtin.yaml", CONFIG.format(name="builtin", trainer="  backend: cpu"))
        rc, out, err = w.run("up", builtin)
        zp.check(rc == 0, "built-in run: exit %d:\n%s" % (rc, err[-2000:]))
        mine = w.write("mine.yaml", CONFIG.format(name="mine", trainer="  command: [%s]" % EXAMPLE))
        rc, out, err = w.run("up", mine)
        zp.check(rc == 0, "the example as trainer.command: exit %d:\n%s" % (rc, err[-2000:]))
        want, got = proofs(w.run_dir("builtin")), proofs(w.run_dir("mine"))
        zp.check(len(want) == 4, "the built-in run has %d epoch records" % len(want))
        zp.check(got == want, "the program's epoch proofs differ:\n%s\n%s" % (got, want))
        for (split, epoch), (samples, distinct, _, _, expected) in got.items():
            zp.check(samples == distinct == expected == (3000 if split == "train" else 500),
                     "%s epoch %d: %d samples, %d distinct" % (split, epoch, samples, distinct))
        with open(os.path.join(w.run_dir("mine"), "logs", "trainer-0.log")) as f:
            lines = [l for l in f.read().splitlines() if " epoch " in l and "samples" in l]
        zp.check(len(lines) == 4 and lines[0].startswith("train epoch 0: 3000 samples"),
                 "the program's own lines: %s" % lines)
        with open(os.path.join(w.run_dir("mine"), "report.json")) as f:
            report = json.load(f)
        wait = report["trainer_wait_share"]  # the example computes nothing: it mostly waits
        zp.check(0.5 <= wait <= 1, "the trainer's wait share is %s" % wait)


def a_program_attached_to_a_rank_the_run_does_not_have_is_refused():
    with zp.Workdir() as w:
        cfg = w.write("bad.yaml", CONFIG.format(
            name="bad", trainer="  command: [%s, runs/bad, '3']" % EXAMPLE))
        rc, out, err = w.run("up", cfg, timeout=120)
        zp.check(rc != 0, "the run should fail:\n" + err[-2000:])
        zp.check("trainer[0]" in err and "rank 3" in err, err[-2000:])


if __name__ == "__main__":
    zp.main([the_example_consumes_every_batch_exactly_once_as_the_built_in_trainer_would,
             a_program_attached_to_a_rank_the_run_does_not_have_is_refused])
