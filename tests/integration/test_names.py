"""The naming rule of pipeline/README.md holds in every C file of the tree:
a function other files can call (not static) is named after its file,
zp_<file>_* (or zp_<file> itself), but for the few exceptions that README
declares: the logging words of log.c, hash.c's generator zp_rng_*, the
supervisor's entry points (zp_sup_*, zp_up*, zp_pipeline_run), the public
loader API of pipeline/include/zeus_pipe_loader.h (zp_loader_* in
loader_api.c) and the trainer's GPU calls of gpu.h, which gpu_load.c
forwards to the cuda module. A second test makes sure the check sees a
misnamed function, and does not take a static one or a call for one."""
import glob
import os
import re

import zp

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFINITION = re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b(zp_\w+)\s*\(", re.M)
EXCEPTIONS = {
    "log.c": re.compile(r"^zp_(error|warn|warn_limited|info|strerror|now_ns|wall_s|log\w*)$"),
    "hash.c": re.compile(r"^zp_rng_\w+$"),
    "loader_api.c": re.compile(r"^zp_loader_\w+$"),
    "gpu_load.c": re.compile(r"^zp_gpu_\w+$"),
}
SUPERVISOR = re.compile(r"^zp_(sup_\w+|up|up_\w+|pipeline_run)$")


def misnamed(path, text):
    """The non-static functions `text` (the file `path`) defines whose name
    breaks the rule."""
    name = os.path.basename(path)
    stem = name[:-2]
    allowed = EXCEPTIONS.get(name)
    supervisor = os.path.basename(os.path.dirname(path)) == "supervisor"
    bad = []
    for fn in DEFINITION.findall(text):
        if fn == "zp_" + stem or fn.startswith("zp_%s_" % stem):
            continue
        if (allowed and allowed.match(fn)) or (supervisor and SUPERVISOR.match(fn)):
            continue
        bad.append(fn)
    return bad


def every_function_is_named_after_its_file():
    files = sorted(glob.glob(os.path.join(ROOT, "pipeline", "*", "*.c")) +
                   glob.glob(os.path.join(ROOT, "stages", "*", "*.c")) +
                   glob.glob(os.path.join(ROOT, "schemas", "*.c")))
    zp.check(len(files) > 80, "only %d C files found under %s" % (len(files), ROOT))
    bad = {}
    for f in files:
        found = misnamed(f, zp.text(f))
        if found:
            bad[os.path.relpath(f, ROOT)] = found
    zp.check(not bad, "functions not named after their file (pipeline/README.md's rule): %s" % bad)


def the_check_sees_a_misnamed_function_and_nothing_else():
    text = ("static int helper(void) { return zp_other_call(1); }\n"
            "int zp_ring_open(zp_ring_t *r)\n{\n    return zp_frames_init(r);\n}\n"
            "void zp_ring(void) {}\n"
            "const char *zp_rings_name(int k)\n{\n    return 0;\n}\n"
            "static void zp_local(void) {}\n")
    zp.check(misnamed("/x/pipeline/ring/ring.c", text) == ["zp_rings_name"],
             misnamed("/x/pipeline/ring/ring.c", text))
    zp.check(misnamed("/x/pipeline/supervisor/run.c", "int zp_up(void) {}\nint zp_run_x(void) {}\n") == [],
             "a supervisor entry point or its own file's function refused")
    zp.check(misnamed("/x/pipeline/report/run.c", "int zp_up(void) {}\n") == ["zp_up"],
             "the supervisor's exception let into another folder")


if __name__ == "__main__":
    zp.main([every_function_is_named_after_its_file,
             the_check_sees_a_misnamed_function_and_nothing_else])
