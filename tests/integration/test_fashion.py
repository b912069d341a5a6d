"""Fashion-MNIST from the Debian package through the whole pipeline: a run
limited to 300 batches lowers the loss and beats chance on the test split."""
import os
import zp

CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs",
                      "fashion-mnist.yaml")


def fashion_mnist_run_of_300_batches_decreases_the_loss():
    with zp.Workdir() as w:
        rc, out, err = w.run("up", CONFIG, "run.name=fm", "trainer.epochs=1",
                             "trainer.limit_train_batches=300", "trainer.log_every_steps=25")
        zp.check(rc == 0, "exit %d\n%s\n%s" % (rc, out, err))
        steps = [m for m in zp.metrics(w.run_dir("fm")) if m.get("event") == "step"]
        zp.check(len(steps) == 12, "%d step records, want 12" % len(steps))
        first, last = steps[0]["loss"], steps[-1]["loss"]
        zp.check(last < 0.75 * first, "loss went from %.4f to %.4f" % (first, last))
        train = zp.epoch_ends(w.run_dir("fm"), "train")[0]
        zp.check(train["samples"] == 300 * 128, "trained on %d samples" % train["samples"])
        test = zp.epoch_ends(w.run_dir("fm"), "test")[0]
        zp.check(test["samples"] == 10000 and test["distinct"] == 10000,
                 "test split: %d samples" % test["samples"])
        zp.check(test["accuracy"] > 0.75, "test accuracy %.4f" % test["accuracy"])
        zp.check("test_acc" in out and "%.4f" % test["accuracy"] in out,
                 "the summary shows the test accuracy:\n" + out)


if __name__ == "__main__":
    zp.main([fashion_mnist_run_of_300_batches_decreases_the_loss])
