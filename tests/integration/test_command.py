"""trainer.command: a user's program as each rank's trainer. It gets the run
and its rank in its environment (and torchrun's variables), runs in the
config's folder, and its output lands in logs/trainer-R.log and on the
supervisor's stderr; its exit status ends the run (0: clean end once every
rank's is done, even with batches left in the ring; non-zero: the run fails
naming trainer[R] and its last line). A program that is missing or not
executable stops `up` with exit 2 before anything starts, and so does `up
--resume` of such a run, saying how to resume instead; Ctrl-C stops the
program and every stage within seconds. These programs do not read the ring:
prefetch fills it and waits on back-pressure until it is stopped."""
import os
import signal
import time
import zp

CONFIG = """
run: {{name: {name}}}
seed: 5
dataset:
  source: synthetic
  synthetic: {{train_samples: 2000, test_samples: 200, shape: [1, 8, 8], classes: 4}}
loader: {{workers: 1, task_size: 16}}
prefetch: {{batch_size: 64, depth: 2}}
trainer:
  gpus: {gpus}
  command: {command}
"""

ENV_SCRIPT = """#!/bin/sh
echo "rank $RANK starts: $1"
env | grep -E '^(ZP_RUN|ZP_RANK|ZP_WORLD|RANK|WORLD_SIZE|LOCAL_RANK|MASTER_ADDR|MASTER_PORT)=' \\
    > "env-$RANK.txt"
echo "CWD=$(pwd)" >> "env-$RANK.txt"
echo "ARG=$1" >> "env-$RANK.txt"
echo "rank $RANK done" >&2
exit ${EXIT_WITH:-0}
"""


def script(w, name, text, mode=0o755):
    path = w.write(name, text)
    os.chmod(path, mode)
    return path


def read_env(w, rank):
    with open(os.path.join(w.path, "env-%d.txt" % rank)) as f:
        return dict(line.rstrip("\n").split("=", 1) for line in f)


def two_ranks_get_their_environment_and_the_run_ends_cleanly():
    with zp.Workdir() as w:
        script(w, "env.sh", ENV_SCRIPT)
        cfg = w.write("run.yaml", CONFIG.format(name="envs", gpus=2, command='[./env.sh, "a b"]'))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 0, "exit %d:\n%s" % (rc, err[-2000:]))
        run = os.path.realpath(w.run_dir("envs"))
        envs = [read_env(w, r) for r in (0, 1)]
        for r, env in enumerate(envs):
            want = {"ZP_RUN": run, "ZP_RANK": str(r), "ZP_WORLD": "2", "RANK": str(r),
                    "WORLD_SIZE": "2", "LOCAL_RANK": str(r), "MASTER_ADDR": "127.0.0.1",
                    "CWD": os.path.realpath(w.path), "ARG": "a b"}
            zp.check({k: env.get(k) for k in want} == want, "rank %d: %r" % (r, env))
            port = int(env["MASTER_PORT"])
            zp.check(0 < port < 65536 and env["MASTER_PORT"] == envs[0]["MASTER_PORT"], envs)
            log = zp.text(os.path.join(run, "logs", "trainer-%d.log" % r))
            zp.check("rank %d starts: a b\n" % r in log and "rank %d done\n" % r in log, log)
            zp.check("trainer[%d]: rank %d done\n" % (r, r) in err, err[-2000:])
        zp.check("run finished" in err, err[-2000:])
        zp.check(not zp.stage_pids(w.path), "stages left: %r" % zp.stage_pids(w.path))
        # its checkpoints are the program's own: `up --resume` says how instead
        rc, out, err = w.run("up", "--resume", run)
        zp.check(rc == 2 and "its trainer is trainer.command" in err and "load_state_dict()" in err,
                 "up --resume: exit %d:\n%s" % (rc, err[-2000:]))


def a_failing_command_fails_the_run_naming_its_rank_and_last_line():
    with zp.Workdir() as w:
        script(w, "env.sh", ENV_SCRIPT)
        cfg = w.write("run.yaml", CONFIG.format(name="fails", gpus=1, command="[./env.sh, x]"))
        os.environ["EXIT_WITH"] = "3"
        try:
            rc, out, err = w.run("up", cfg)
        finally:
            del os.environ["EXIT_WITH"]
        zp.check(rc == 1, "exit %d:\n%s" % (rc, err[-2000:]))
        zp.check("trainer[0] exited with status 3; stopping the run" in err, err[-2000:])
        tail = err.split("last lines of", 1)[-1]
        zp.check("trainer-0.log" in tail and "  rank 0 done\n" in tail, err[-2000:])
        zp.check(not zp.stage_pids(w.path), "stages left: %r" % zp.stage_pids(w.path))


def a_missing_or_not_executable_command_stops_up_before_any_stage():
    with zp.Workdir() as w:
        script(w, "plain.sh", "#!/bin/sh\nexit 0\n", mode=0o644)
        cases = [("[./missing.sh]", os.path.join(w.path, "missing.sh"), "No such file"),
                 ("[./plain.sh, --x]", os.path.join(w.path, "plain.sh"), "not executable"),
                 ("[no-such-program-zp]", "no-such-program-zp", "not an executable program on PATH")]
        for i, (command, path, why) in enumerate(cases):
            cfg = w.write("run%d.yaml" % i, CONFIG.format(name="bad%d" % i, gpus=1, command=command))
            rc, out, err = w.run("up", cfg)
            zp.check(rc == 2, "%s: exit %d:\n%s" % (command, rc, err))
            zp.check("trainer.command" in err and path in err and why in err, err)
            zp.check(not os.path.exists(w.run_dir("bad%d" % i)), "%s: a run folder" % command)
            zp.check("run " not in err and not zp.stage_pids(w.path), err)
        cfg = w.write("empty.yaml", CONFIG.format(name="empty", gpus=1, command='[./plain.sh, ""]'))
        rc, out, err = w.run("up", cfg)
        zp.check(rc == 2 and "empty.yaml:11:25: trainer.command: item 1 is empty" in err,
                 "exit %d: %s" % (rc, err))


def ctrl_c_while_the_command_sleeps_stops_everything_within_seconds():
    with zp.Workdir() as w:
        script(w, "sleepy.sh", "#!/bin/sh\nsleep 120 &\necho $! > sleep.pid\nwait\n")
        cfg = w.write("run.yaml", CONFIG.format(name="sleepy", gpus=1, command="[./sleepy.sh]"))
        p = w.start("up", cfg)
        run = w.run_dir("sleepy")
        pid_file = os.path.join(w.path, "sleep.pid")
        zp.wait_for(lambda: os.path.exists(pid_file) and open(pid_file).read().strip() and
                    len(zp.stage_pids(run)) >= 4, 30, "the program and the stages")
        sleep_pid = int(open(pid_file).read())
        start = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        took = time.monotonic() - start
        zp.check(p.returncode == 130, "exit %d:\n%s" % (p.returncode, err[-2000:]))
        zp.check(took < 5, "stopping took %.1f s" % took)
        zp.check(not zp.stage_pids(run), "stages left: %r" % zp.stage_pids(run))
        try:
            with open("/proc/%d/stat" % sleep_pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            state = "gone"
        zp.check(state in ("gone", "Z"), "the program's sleep is still %s" % state)


if __name__ == "__main__":
    zp.main([two_ranks_get_their_environment_and_the_run_ends_cleanly,
             a_failing_command_fails_the_run_naming_its_rank_and_last_line,
             a_missing_or_not_executable_command_stops_up_before_any_stage,
             ctrl_c_while_the_command_sleeps_stops_everything_within_seconds])
