"""_start.py — Python-first use: a script started with `python3 train.py` or
`torchrun --nproc_per_node N train.py` starts the data stages itself.

    with zeus_pipe.attach(config="configs/fashion-cnn.yaml",
                          overrides={"trainer.epochs": 3}) as zp:
        for x, y in zp.train: ...

Alone, the script starts `zeus-pipe up --attach CONFIG KEY=VALUE...
trainer.gpus=1` as its child and attaches as rank 0. Under torchrun (LOCAL_RANK,
RANK, WORLD_SIZE, LOCAL_WORLD_SIZE set) local rank 0 starts one pipeline of
WORLD_SIZE ranks and tells the others its run directory through a file in
$TMPDIR/zeus-pipe-<uid>/ named after the torchrun agent; each rank attaches
with its RANK. With ZP_RUN set (the script is trainer.command of `zeus-pipe
up`) none of this happens: attach() attaches to that run and config is not
read.

The binary is looked for in $ZP_BIN, beside the libzeuspipe.so loaded, in the
checkout's build/, then on PATH.

The pipeline's output (the supervisor's, the progress line and the report)
goes to RUN/logs/supervisor.log, not onto the terminal. When the pipeline
fails, the script's next wait for a batch raises ZeusPipeError with the
supervisor's last lines (a failure after the last batch: printed on stderr at
close). A pipeline that cannot start (a bad config) raises ZeusPipeError with
its error text from attach().

Stopping: close() (or leaving the `with`, or the interpreter's exit, through
atexit) detaches and then, when the run had sent its END, waits for the
pipeline to end by itself (every rank detached), else stops it (SIGTERM: every
stage stops, shared memory and sockets removed). A script killed outright
(SIGKILL, or torchrun's SIGTERM) cannot do this: the supervisor notices that
its parent is gone and stops by itself."""
from __future__ import annotations

import atexit
import collections
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from types import TracebackType
from typing import TYPE_CHECKING, Mapping, TextIO

from ._lib import END, Batch, ZeusPipeError, load
from .client import Client

if TYPE_CHECKING:
    import torch

_STOP_S = 30           # a stopping pipeline gets this long before it is killed
_ALONE_S = 2           # a run of one rank that had its END gets this long to end by itself
_TAIL = 40             # lines of the pipeline's output kept for an error
_started: weakref.WeakSet[Started] = weakref.WeakSet()  # clients whose pipeline atexit stops
# what the supervisor says (and the last lines of a stage's log it quotes), as
# opposed to the logger's progress line and report on the same output
_SAYS = re.compile(r"zeus-pipe: |  \d\d:\d\d:\d\d")


def find_bin() -> str:
    """The zeus-pipe binary: $ZP_BIN (which must be it), beside the libzeuspipe.so loaded (a
    build folder) or in its zeus-pipe/ (installed), the checkout's build/, then PATH. Raises ZeusPipeError naming what was tried."""
    env = os.environ.get("ZP_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        raise ZeusPipeError("zeus_pipe: $ZP_BIN %s: not an executable file; set it to the "
                            "zeus-pipe binary, or unset it" % env)
    tried = []
    here = os.path.dirname(os.path.abspath(__file__))
    lib = _library_folder()
    for where, folder in (("beside libzeuspipe.so", lib),
                          ("installed with libzeuspipe.so", lib and os.path.join(lib, "zeus-pipe")),
                          ("the checkout's build/", os.path.join(here, "..", "..", "build"))):
        if folder:
            path = os.path.normpath(os.path.join(folder, "zeus-pipe"))
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
            tried.append("%s %s: no such file" % (where, path))
    found = shutil.which("zeus-pipe")
    if found:
        return found
    tried.append("PATH: no zeus-pipe")
    raise ZeusPipeError("zeus_pipe: the zeus-pipe binary was not found; tried " + "; ".join(tried) +
                        ". Set ZP_BIN to it, or build zeus-pipe (cmake --build build)")


def _library_folder() -> str | None:
    """The folder of the libzeuspipe.so this process loaded, from /proc/self/maps."""
    try:
        load()
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip()
                if os.path.basename(path).startswith("libzeuspipe.so"):
                    return os.path.dirname(path)
    except (OSError, ZeusPipeError):
        pass
    return None


def _ranks() -> tuple[int, int, int]:
    """(rank, world, local_rank) of this process: torchrun's, else (0, 1, 0)."""
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
    if not all(n in os.environ for n in names):
        return 0, 1, 0
    rank, world, local, local_world = (int(os.environ[n]) for n in names)
    if world != local_world:
        raise ZeusPipeError(
            "zeus_pipe: %d ranks on several hosts (WORLD_SIZE %d, LOCAL_WORLD_SIZE %d): a "
            "script starts one host's pipeline only; under Slurm run `srun zeus-pipe up CONFIG` "
            "with trainer.command instead" % (world, world, local_world))
    return rank, world, local


class Pipeline:
    """`zeus-pipe up --attach CONFIG ...`, this process's child, and its output."""

    def __init__(self, config: str, overrides: Mapping[str, object] | None, world: int) -> None:
        if not os.path.isfile(config):
            raise ZeusPipeError("zeus_pipe: config %s: no such file (a path from %s, or "
                                "absolute)" % (config, os.getcwd()))
        args = [find_bin(), "up", "--attach", os.fspath(config)]
        for key, value in (overrides or {}).items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            elif isinstance(value, (list, tuple)):
                value = "[%s]" % ", ".join(str(v) for v in value)
            args.append("%s=%s" % (key, value))
        args.append("trainer.gpus=%d" % world)  # one rank per process of the script
        self.args, self.stopping, self.world = args, False, world
        self.run: str | None = None  # the run directory, once the supervisor said it
        self.tail: collections.deque[str] = collections.deque(maxlen=_TAIL)
        self._log: TextIO | None = None
        self._early: list[str] = []
        self.shown = False
        self._ready = threading.Event()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, name="zeus-pipe output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        """The supervisor's lines: the run directory from ZP_RUN=, then every
        line into RUN/logs/supervisor.log; the last _TAIL lines it says
        itself (every line until the run directory is made) in tail."""
        assert self.proc.stdout is not None  # Popen(stdout=PIPE)
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace")
            if self.run is None and line.startswith("ZP_RUN="):
                self._open_log(line[len("ZP_RUN="):].rstrip("\n"))
                continue
            if self.run is None or _SAYS.match(line):  # not the progress line and report
                self.tail.append(line.rstrip("\n"))
            if self._log:
                self._log.write(line)
                self._log.flush()
            else:
                self._early.append(line)
        self.proc.wait()
        if self._log:
            self._log.close()
        self._ready.set()

    def _open_log(self, run: str) -> None:
        try:
            self._log = open(os.path.join(run, "logs", "supervisor.log"), "a")
            self._log.writelines(self._early)
            self._log.flush()
        except OSError:
            self._log = None  # the output is kept in tail only
        self._early, self.run = [], run
        self._ready.set()

    def failed(self) -> bool:
        """True when the pipeline has ended with a failure this process did not
        cause (not Ctrl-C: that is the user's)."""
        rc = self.proc.poll()
        return rc not in (None, 0, 128 + signal.SIGINT) and not self.stopping

    def error(self) -> str:
        """The failure in words, with the last lines of the output; once said
        (raised), stop() does not print it again."""
        self._reader.join(5)  # every line read
        self.shown = True
        rc = self.proc.poll()
        assert rc is not None  # only said once the pipeline has ended
        where = " (its log: %s)" % os.path.join(self.run, "logs", "supervisor.log") if self.run else ""
        return "zeus_pipe: `%s` %s%s:\n%s" % (
            " ".join(self.args), "exited with status %d" % rc if rc >= 0 else
            "was killed by signal %d" % -rc, where, "\n".join(self.tail))

    def wait_run(self, timeout_s: float) -> str:
        """The run directory, once the supervisor has made it; raises
        ZeusPipeError with its output when it exits first or takes too long."""
        if not self._ready.wait(timeout_s):
            self.stop(ended=False)
            raise ZeusPipeError("zeus_pipe: `%s` made no run directory in %ss" % (
                " ".join(self.args), timeout_s))
        if self.run is None:
            raise ZeusPipeError(self.error())
        return self.run

    def stop(self, ended: bool) -> None:
        """Waits for the pipeline to end by itself when the run had ended
        (every rank detaching), else stops it: SIGTERM, then SIGKILL after
        _STOP_S."""
        if self.proc.poll() is None and ended:
            # other ranks may still be attached; alone, nothing is left to wait for
            wait = _STOP_S if self.world > 1 else _ALONE_S
            try:
                self.proc.wait(wait)
            except subprocess.TimeoutExpired:
                if self.world > 1:
                    sys.stderr.write("zeus_pipe: the pipeline did not end %ds after this rank's "
                                     "END (another rank still attached?); stopping it\n" % wait)
        if self.failed() and not self.shown:  # after the last batch: onto the terminal
            sys.stderr.write(self.error() + "\n")
        self.stopping = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(_STOP_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(5)


def _rendezvous() -> str:
    """Under torchrun: the file through which local rank 0 tells the other
    ranks its run directory, named after the torchrun agent (the parent of
    every local rank: its pid and start time) and its restart count."""
    ppid = os.getppid()
    try:
        with open("/proc/%d/stat" % ppid) as f:
            started = f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "0"
    folder = os.path.join(tempfile.gettempdir(), "zeus-pipe-%d" % os.getuid())
    os.makedirs(folder, mode=0o700, exist_ok=True)
    name = "torchrun-%s-%d-%s-%s" % (os.environ.get("TORCHELASTIC_RUN_ID", "none"), ppid, started,
                                     os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    return os.path.join(folder, name.replace("/", "_"))


def _tell(path: str, text: str) -> None:
    tmp = "%s.%d" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _hear(path: str, timeout_s: float) -> str:
    """Local rank 0's run directory; raises its error, or after timeout_s."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            with open(path) as f:
                text = f.read()
        except FileNotFoundError:
            time.sleep(0.05)
            continue
        if text.startswith("ERROR\n"):
            raise ZeusPipeError(text[len("ERROR\n"):])
        return text
    raise ZeusPipeError("zeus_pipe: local rank 0 started no pipeline in %ss (%s not written): "
                        "does rank 0 call zeus_pipe.attach(config=...) too?" % (timeout_s, path))


def _supervisor_alive(run: str) -> bool:
    try:
        with open(os.path.join(run, "supervisor.pid")) as f:
            os.kill(int(f.read().split()[0]), 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


def start(config: str | os.PathLike[str], overrides: Mapping[str, object] | None = None,
          timeout_s: float = 60, device: str | torch.device | None = None,
          raw: bool = False) -> Started:
    """zeus_pipe.attach(config=...): the pipeline started (or, under torchrun
    on local rank > 0, local rank 0's found) and this rank attached. Returns a
    Client; raises ZeusPipeError with the pipeline's error text."""
    rank, world, local = _ranks()
    meet = _rendezvous() if world > 1 else None
    pipeline = None
    if local == 0:
        pipeline = Pipeline(os.fspath(config), overrides, world)
        try:
            run = pipeline.wait_run(timeout_s)
        except ZeusPipeError as e:
            if meet:
                _tell(meet, "ERROR\n%s" % e)
            raise
        if meet:
            _tell(meet, run)
    else:
        assert meet is not None  # local rank > 0: world > 1
        run = _hear(meet, timeout_s)
    return Started(pipeline, meet, run, rank, timeout_s, device, raw)


class Started(Client):
    """A Client whose pipeline this script started (local rank 0) or found
    (the other ranks): its failure raises at the next wait for a batch, and
    close() stops it."""

    def __init__(self, pipeline: Pipeline | None, meet: str | None, run: str, rank: int,
                 timeout_s: float, device: str | torch.device | None, raw: bool) -> None:
        self._pipeline, self._meet, self._ended = pipeline, meet, False
        end = time.monotonic() + timeout_s
        while True:  # short attaches, so that a pipeline failing at start is seen
            try:
                Client.__init__(self, run, rank, min(1.0, max(end - time.monotonic(), 0)),
                                device, raw)
                break
            except ZeusPipeError:
                self._check_pipeline(run)
                if time.monotonic() >= end:
                    self._stop_pipeline()
                    raise
        _started.add(self)

    def _heard(self, rc: int, timeout_ms: int) -> None:
        """Every zp_client_next: END is noted (the run has ended: close()
        waits for the pipeline instead of stopping it), and a wait that timed
        out checks that the pipeline still runs."""
        if rc == END:
            self._ended = True
        elif rc == 0 and timeout_ms:  # not a look without waiting (device="cuda" takes ahead)
            self._check_pipeline(self.run)

    def _check_pipeline(self, run: str) -> None:
        p = self._pipeline
        if p is not None and p.failed():
            error = p.error()
            self._stop_pipeline()
            raise ZeusPipeError(error)
        if p is None and not _supervisor_alive(run):
            raise ZeusPipeError("zeus_pipe: the pipeline of %s has stopped (rank 0's "
                                "output and %s say why)" % (
                                    run, os.path.join(run, "logs", "supervisor.log")))

    def _stop_pipeline(self) -> None:
        p, self._pipeline = self._pipeline, None
        if p is not None:
            p.stop(self._ended)
            if self._meet:
                try:
                    os.unlink(self._meet)
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        """Detaches, then ends the pipeline this script started: waits for it
        when the run had sent END (until every rank detached), or when the
        `with` block ended without an exception (a loop of fewer epochs than
        trainer.epochs: the supervisor ends the run as finished, and says
        so); else stops it. Safe twice."""
        try:
            if getattr(self, "_c", None) and not self._ended and not getattr(self, "_left_cleanly", False):
                # after the last epoch the END is on its way: 0.5 s for it
                # (a run cut short gets a batch instead). Not after a clean
                # leave: the loop's last EPOCH_END tells the supervisor it ended there
                self._ended = self._lib.zp_client_next(self._c, ctypes.byref(Batch()), 500) == END
            Client.close(self)
        finally:
            self._ended = self._ended or getattr(self, "_left_cleanly", False)
            self._stop_pipeline()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._left_cleanly = kind is None
        self.close()


@atexit.register
def _stop_all() -> None:
    for client in list(_started):
        try:
            client.close()
        except Exception:
            pass
