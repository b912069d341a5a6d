"""Local peers that speak garbage to a run's sockets (sock/ is 0700: the same
user only): a ZeroMQ frame header that claims 4 GiB and bytes that are not
ZMTP at all, on the cache stage's work and fetch sockets and the logger's
events socket. Each socket's largest message is
bounded by what the run really sends (ZMQ_MAXMSGSIZE): libzmq drops such a
peer before anything is allocated for it (the cache stage's peak virtual
memory grows far less than 4 GiB, and on the sanitizer build no allocation of an
absurd size aborts a stage), and the run completes, every sample once."""
import os
import random
import socket
import struct
import time

import zp

CONFIG = """
run: {name: hostile}
seed: 4
dataset:
  source: synthetic
  synthetic: {train_samples: 4000, test_samples: 400, shape: [1, 8, 8], classes: 4, cost_us: 1500}
loader: {workers: 2, task_size: 16}
prefetch: {batch_size: 64}
trainer: {backend: cpu, model: {hidden: [16]}, epochs: 2}
"""

GREETING = b"\xff" + b"\0" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\0") + b"\0" * 32


def ready(kind):
    def prop(name, value):
        return bytes([len(name)]) + name + struct.pack(">I", len(value)) + value
    body = b"\x05READY" + prop(b"Socket-Type", kind)
    return b"\x04" + bytes([len(body)]) + body


def attack(path, kind, how):
    """One connection to the ipc socket at `path`: a handshake then a frame
    that claims 4 GiB, or random bytes from the first byte on."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    try:
        s.connect(path)
        if how == "huge":
            s.sendall(GREETING + ready(kind))
            s.sendall(b"\x02" + struct.pack(">Q", 4 << 30) + b"\0" * 4096)
        else:
            s.sendall(bytes(random.Random(path).getrandbits(8) for _ in range(4096)))
        time.sleep(0.2)
    except OSError:
        pass  # dropped already: what is asked
    finally:
        s.close()


def peak_vm_kib(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmPeak:"):
            return int(line.split()[1])
    return 0


def garbage_frames_on_every_socket_drop_the_peer_and_the_run_goes_on():
    with zp.Workdir() as w:
        cfg = w.write("hostile.yaml", CONFIG)
        p = w.start("up", cfg)
        run = w.run_dir("hostile")
        sock = os.path.join(run, "sock")
        targets = [("work.ipc", b"DEALER"), ("fetch.ipc", b"DEALER"), ("events.ipc", b"PUSH")]
        zp.wait_for(lambda: all(os.path.exists(os.path.join(sock, t)) for t, _ in targets), 60,
                    "the run's sockets")
        pids = [pid for pid in zp.stage_pids(w.path)
                if "stage cache" in zp.text("/proc/%d/cmdline" % pid).replace("\0", " ")]
        zp.check(pids, "no cache stage")
        before = peak_vm_kib(pids[0])  # a sanitizer build's shadow is terabytes: compare growth
        for name, kind in targets:
            for how in ("huge", "bytes", "huge"):
                attack(os.path.join(sock, name), kind, how)
        zp.check(os.path.exists("/proc/%d" % pids[0]), "the cache stage is gone after the attacks")
        grown = peak_vm_kib(pids[0]) - before
        zp.check(grown < 1 << 20, "the cache stage reserved %d MiB more for a peer's claim"
                 % (grown >> 10))
        out, err = p.communicate(timeout=240)
        zp.check(p.returncode == 0, "up exited %d after the attacks:\n%s" % (p.returncode, err[-3000:]))
        for split, n in (("train", 4000), ("test", 400)):
            for e in zp.epoch_ends(run, split):
                zp.check(e["samples"] == n == e["distinct"], e)


if __name__ == "__main__":
    zp.main([garbage_frames_on_every_socket_drop_the_peer_and_the_run_goes_on])
