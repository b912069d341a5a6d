"""zeus_pipe.attach(device=...) refuses, before attaching to anything, a
device it cannot use, with a ZeusPipeError saying why and what to do: "cuda"
where torch has no CUDA (here: Debian's CPU-only torch), a GPU index this
process does not see, a device that is no CUDA device. The GPU path itself
is test_gpu_python.py. Exits 77 (skipped) where /usr/bin/python3 has no
torch."""
import os
import subprocess
import sys
import zp

PACKAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")


def refusal(device):
    """The ZeusPipeError's sentence of attach(device=device) to a run that
    does not exist (the device is checked first), or None when none came."""
    import zeus_pipe
    try:
        zeus_pipe.attach(run="/nonexistent/zp-run", rank=0, timeout_s=0, device=device)
    except zeus_pipe.ZeusPipeError as e:
        return str(e)
    return None


def cuda_without_a_gpu_is_refused_naming_the_reason():
    import torch
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        err = refusal("cuda:%d" % count)
        zp.check(err and "no such GPU: this process sees %d" % count in err, err)
        return
    for device in ("cuda", "cuda:0"):
        err = refusal(device)
        zp.check(err and "torch.cuda.is_available() is False" in err and
                 "device=None for CPU tensors" in err, "attach(device=%r): %r" % (device, err))


def a_device_that_is_not_cuda_is_refused():
    err = refusal("meta")
    zp.check(err and "only a CUDA device" in err, err)
    err = refusal("no-such-device")
    zp.check(err and "attach(device='no-such-device')" in err, err)


def cpu_is_the_default_path_not_a_refusal():
    # "cpu" goes on to attach (and fails there: the run does not exist)
    err = refusal("cpu")
    zp.check(err and "no such run directory" in err, err)


if __name__ == "__main__":
    if subprocess.run([sys.executable, "-c", "import torch"], capture_output=True).returncode:
        print("SKIP: %s has no torch (Debian: apt install python3-torch)" % sys.executable)
        sys.exit(77)
    san = zp.sanitizer_env()  # this process loads the library: again, with what it needs
    if san and os.environ.get("LD_PRELOAD") != san["LD_PRELOAD"]:
        os.execve(sys.executable, [sys.executable] + sys.argv, dict(os.environ, **san))
    sys.path.insert(0, os.path.abspath(PACKAGE))
    os.environ.setdefault("ZP_LIBRARY", os.path.join(os.path.dirname(zp.BIN), "libzeuspipe.so"))
    zp.main([cuda_without_a_gpu_is_refused_naming_the_reason,
             a_device_that_is_not_cuda_is_refused,
             cpu_is_the_default_path_not_a_refusal])
