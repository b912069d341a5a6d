/* python.h — how zeus-pipe runs the user's Python: where the zeus_pipe
 * package and libzeuspipe.so are, the environment a Python process of a run
 * gets, and the probe of a `dataset.source: python` Dataset.
 *
 * The probe runs `INTERPRETER -m zeus_pipe.probe SPEC ANSWER` once, before
 * any stage starts: it imports dataset.python.class, builds each split,
 * takes len() and item 0, and writes into the file ANSWER the split sizes,
 * the fields of item 0 and the hash of the callable's source file, which
 * become the run's dataset description (dataset.h); what the Dataset prints
 * goes to the log, never into the answer. The loaders (`INTERPRETER -m
 * zeus_pipe._loader_process`) build the Dataset again from the same SPEC,
 * RUN/dataset/python.json. Every child waited on has a bound: 30 s for the
 * interpreter to answer `import zeus_pipe`, 10 minutes for the probe. */
#ifndef ZP_PYTHON_H
#define ZP_PYTHON_H

#include "pipeline/config/config.h"
#include "pipeline/dataset/dataset.h"

#include <stddef.h>

/* The folder that holds the zeus_pipe package: `python/` beside the running
 * zeus-pipe (installed), else the source tree's python/ the binary was
 * built from. 0, or -ENOENT with buf the last place tried. */
int zp_python_package(char *buf, size_t len);

/* libzeuspipe.so beside the running zeus-pipe (a build folder), else
 * libzeuspipe.so.1 in the folder above it (installed). */
void zp_python_library(char *buf, size_t len);

/* Whether interpreter `interp` (a path, or a name on PATH) finds the module
 * `module` (a Python string literal, quotes included: "'torch'") without
 * importing it: 1 yes, 0 no, -1 unknown (it did not start, or did not answer
 * in time: not an interpreter that answers). */
int zp_python_has_module(const char *interp, const char *module);

/* PYTHONPATH for a Python process of the run whose interpreter is `interp`
 * (NULL: unknown): the user's own folders, then the package's — unless that
 * interpreter imports a zeus_pipe of its own (pip-installed into a venv or
 * conda, or on the user's PYTHONPATH), which is then left first. 0 with it in
 * buf; -ENOENT when nothing is to be added (no package here, or the
 * interpreter has its own); ZP_EINVAL when it does not fit in len (leave the
 * user's as it is). */
int zp_python_path(const char *interp, char *buf, size_t len);

/* An environment for the run's Python processes of interpreter `interp`:
 * this process's, with zp_python_path() and ZP_LIBRARY set to
 * zp_python_library(). Built once (for the first interp asked); owned by this
 * module, valid for the process's life. NULL when out of memory. */
char *const *zp_python_env(const char *interp);

/* The SPEC of cfg's Dataset as JSON: class, path (absolute: relative to the
 * config file's folder), args, splits, fields, seed, version. Returns a
 * malloc'd string, or NULL with a sentence in err. */
char *zp_python_spec(const zp_config_t *cfg, char *err, size_t len);

/* Probes cfg's Dataset into ds (meta, ds->python). 0; ZP_ECONFIG when the
 * Dataset could not be imported, built or read (err: the config's key and
 * the traceback's last lines), or its items are not fields zeus-pipe can
 * carry; ZP_EINVAL when the interpreter cannot be started. */
int zp_python_probe(const zp_config_t *cfg, zp_dataset_t *ds, char *err, size_t len);

#endif
