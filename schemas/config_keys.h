/* config_keys.h — every configuration key, declared once.
 *
 * One row per key: X(key, type, field, default, lo, hi, help).
 *   key      dotted name as written in YAML (`trainer.optimizer.lr`) and in
 *            command-line overrides (`trainer.optimizer.lr=0.05`)
 *   type     INT, FLOAT, BOOL, STR, ENUM (choices "a|b" in lo), INTS, FLOATS, STRS
 *            (a list of non-empty strings), SIZE (bytes, written with a unit:
 *            4GiB, 512MiB, 2GB), JSON (any YAML value, kept as JSON), PATH and
 *            PATHS (files or folders), PROG (a name on PATH, or a path).
 *            A relative path is relative to where it is written: the config
 *            file's folder for a value in the file, the working directory for
 *            a default or a KEY=VALUE; it is made absolute when loaded.
 *   field    member of zp_config_t that receives the value
 *   default  the value, written as it would be in YAML; NULL = required
 *   lo, hi   inclusive range for numbers and for every element of a list;
 *            for ENUM, lo is the "|"-separated list of choices
 *   help     one sentence; `zeus-pipe config --keys` prints it
 *
 * Validation, defaults, `zeus-pipe config` and the key table of
 * docs/configuration.md all come from this list. Keys of a section must stay contiguous (the printer nests them).
 */
#ifndef ZP_CONFIG_KEYS_H
#define ZP_CONFIG_KEYS_H

/* The dataset sources, X(NAME, name): dataset.source's choices, in the order
 * that makes config.h's enum (ZP_SOURCE_NAME is the index of `name`) and the
 * registry of pipeline/source/source.c (the ops `zp_source_name`, defined in
 * a file of pipeline/source/), so none of the three can disagree. */
#define ZP_SOURCES(X)                                                                              \
    X(IDX, idx)                                                                                    \
    X(SYNTHETIC, synthetic)                                                                        \
    X(IMAGE_FOLDER, image_folder)                                                                  \
    X(IMAGE_LIST, image_list)                                                                      \
    X(PYTHON, python)                                                                              \
    X(HDF5, hdf5)                                                                                  \
    X(NPY, npy)
#define ZP_SOURCE_CHOICE(NAME, name) "|" #name
/* "idx|synthetic|...": the choices, without the first bar */
#define ZP_SOURCE_CHOICES (ZP_SOURCES(ZP_SOURCE_CHOICE) + 1)

#define ZP_CONFIG_KEYS(X)                                                                          \
    X("run.name", STR, run_name, "", 0, 0,                                                         \
      "name of the run; its folder is run.dir/run.name, so no '/' nor a leading '.' "             \
      "(empty: the config file's base name)")                                                     \
    X("run.dir", PATH, run_dir, "runs", 0, 0,                                                      \
      "folder that holds the run folders")                                                         \
    X("seed", INT, seed, "0", 0, 2147483647, "seed of the sampler and of the model's initial weights") \
    X("dataset.source", ENUM, dataset_source, NULL, ZP_SOURCE_CHOICES, 0,                          \
      "gzip IDX files (the MNIST family), generated samples, a CLASS/*.jpg folder, a list file, "  \
      "or your own map-style Dataset (dataset.python.*)")                                        \
    X("dataset.path", PATH, dataset_path, "/usr/share/datasets/fashion-mnist", 0, 0,                \
      "folder of the dataset's files")                                                           \
    X("dataset.train_images", STR, train_images, "train-images-idx3-ubyte.gz", 0, 0,               \
      "IDX image file of the train split, relative to dataset.path")                              \
    X("dataset.train_labels", STR, train_labels, "train-labels-idx1-ubyte.gz", 0, 0,               \
      "IDX label file of the train split")                                                        \
    X("dataset.test_images", STR, test_images, "t10k-images-idx3-ubyte.gz", 0, 0,                  \
      "IDX image file of the test split")                                                         \
    X("dataset.test_labels", STR, test_labels, "t10k-labels-idx1-ubyte.gz", 0, 0,                  \
      "IDX label file of the test split")                                                         \
    X("dataset.image.train", STR, image_train, "train", 0, 0,                                      \
      "images: the train split's folder (image_folder) or list file (image_list), in dataset.path") \
    X("dataset.image.test", STR, image_test, "val", 0, 0,                                          \
      "images: the test split's folder or list file, in dataset.path")                            \
    X("dataset.image.resize", INT, image_resize, "256", 0, 16384,                                  \
      "images: resize so that the shorter side has this many pixels (0 = keep the size)")          \
    X("dataset.image.crop", INT, image_crop, "224", 1, 16384,                                      \
      "images: then take the center crop x crop pixels")                                          \
    X("dataset.image.cache_side", INT, image_cache_side, "320", 16, 16384,                        \
      "images with dataset.augment.resized_crop: the cache keeps each train image whole, its "    \
      "longer side resized to at most this many pixels (never enlarged), and crops it at assembly") \
    X("dataset.image.max_pixels", INT, image_max_pixels, "100000000", 1, 1099511627776.0,         \
      "an image whose header claims more pixels is a bad sample (loader.on_error), never "       \
      "decoded: a decompression bomb's header is checked before any allocation")                 \
    X("dataset.mean", FLOATS, mean, "[0.2860]", -1000, 1000,                                       \
      "per-channel mean subtracted from pixels scaled to 0..1 (one value: all channels); the "   \
      "default is Fashion-MNIST's")                                                               \
    X("dataset.std", FLOATS, std, "[0.3530]", 1e-6, 1000,                                          \
      "per-channel standard deviation the centred pixels are divided by")                         \
    X("dataset.dtype", ENUM, dtype, "float32", "float32|uint8", 0,                                 \
      "samples as cached and relayed: float32 normalised by the loaders, or uint8 pixels (4x "     \
      "smaller) that the trainer normalises")                                                     \
    X("dataset.synthetic.train_samples", INT, synth_train, "6000", 1, 100000000,                   \
      "samples in the synthetic train split")                                                     \
    X("dataset.synthetic.test_samples", INT, synth_test, "1000", 0, 100000000,                     \
      "samples in the synthetic test split")                                                      \
    X("dataset.synthetic.shape", INTS, synth_shape, "[1, 28, 28]", 1, 65536,                       \
      "shape of one synthetic sample (channels, height, width)")                                  \
    X("dataset.synthetic.classes", INT, synth_classes, "10", 2, 65536,                             \
      "number of labels of the synthetic dataset")                                                \
    X("dataset.synthetic.corrupt_every", INT, synth_corrupt, "0", 0, 1000000000,                   \
      "make every Nth sample (index + 1 divisible by N) fail to load, to test on_error (0 = none)") \
    X("dataset.synthetic.cost_us", INT, synth_cost_us, "0", 0, 1000000,                            \
      "CPU time a loader spends on each synthetic sample, in microseconds")                       \
    X("dataset.files.train", PATHS, arr_train, "[]", 0, 0,                                         \
      "hdf5, npy: the train split's files (hdf5) or folders of .npy files (npy), globs, their "   \
      "samples one after another in this order (a glob's matches sorted)")                         \
    X("dataset.files.test", PATHS, arr_test, "[]", 0, 0,                                           \
      "hdf5, npy: the same for the test split ([]: no test split)")                                \
    X("dataset.fields", JSON, arr_fields, "{}", 0, 0,                                              \
      "hdf5, npy: the sample's fields, {name: where}: the HDF5 dataset's path in every file "     \
      "(/inputs), or the .npy file's name in every folder (inputs.npy); axis 0 is the sample")    \
    X("dataset.hdf5.chunk_cache", SIZE, hdf5_chunk_cache, "64MiB", 0, 17179869184.0,               \
      "hdf5: most bytes of chunks a loader keeps decompressed, shared by the fields of the "      \
      "64 files it keeps open at most (each field's sized down to what a task reads)")                                                \
    X("dataset.augment.where", ENUM, aug_where, "trainer", "trainer|loader", 0,                  \
      "random augmentation of train samples: in the trainer after the cache, or in loaders (cache off)") \
    X("dataset.augment.crop_padding", INT, aug_padding, "0", 0, 4096,                             \
      "random crop of the sample's size from it padded by this many pixels a side (0 = off)")     \
    X("dataset.augment.resized_crop", BOOL, aug_resized_crop, "false", 0, 0,                      \
      "random-resized-crop: a random box (scale of the area, ratio of the sides) resized back")   \
    X("dataset.augment.scale", FLOATS, aug_scale, "[0.08, 1.0]", 0.0001, 1,                       \
      "random-resized-crop: lowest and highest share of the area the box covers")                 \
    X("dataset.augment.ratio", FLOATS, aug_ratio, "[0.75, 1.3333333]", 0.01, 100,                 \
      "random-resized-crop: lowest and highest width / height of the box")                        \
    X("dataset.augment.hflip", BOOL, aug_hflip, "false", 0, 0,                                    \
      "flip half of the train samples left to right")                                             \
    X("dataset.augment.field", STR, aug_field, "image", 0, 0,                                     \
      "python: the uint8 image field (3 x H x W or H x W x 3) the keys above augment, at "       \
      "assembly from the cached record")                                                          \
    X("dataset.augment.size", INT, aug_size, "0", 0, 4096,                                        \
      "python: the side of that field after resized_crop (0: its own height and width); the "    \
      "test split's is its centre resized to it")                                                 \
    X("dataset.python.class", STR, py_class, "", 0, 0,                                            \
      "python: module:callable returning an object with __len__ and __getitem__ (a Dataset), "    \
      "imported in the loaders")                                                                  \
    X("dataset.python.path", PATHS, py_path, "[]", 0, 0,                                           \
      "python: folders put first on sys.path")                                                                \
    X("dataset.python.args", JSON, py_args, "{}", 0, 0,                                            \
      "python: keyword arguments of the callable, for both splits")                               \
    X("dataset.python.splits", JSON, py_splits, "{}", 0, 0,                                        \
      "python: more keyword arguments per split, {train: {...}, test: {...}} (no test: none)")   \
    X("dataset.python.augment.train", STR, py_augment_train, "", 0, 0,                             \
      "python: module:callable applied to every train item after the cache, each epoch, seeded "  \
      "per sample (a torchvision Compose, a function): the random part (\"\": none)")              \
    X("dataset.python.augment.test", STR, py_augment_test, "", 0, 0,                               \
      "python: the same for the test split (a center crop to the train crop's size, say)")        \
    X("dataset.python.random", ENUM, py_random, "refuse", "refuse|cache_first_draw", 0,          \
      "python: a __getitem__ that draws random numbers, with the cache on: refuse (the cache "    \
      "would keep its first draw), or cache_first_draw (keep it, on purpose)")                     \
    X("dataset.python.fields", STRS, py_fields, "[]", 0, 0,                                        \
      "python: names of a tuple item's fields in order ([]: image, label for a pair, else "      \
      "f0, f1, ...); a dict item names its own")                                                  \
    X("dataset.python.normalize", STR, py_normalize, "", 0, 0,                                     \
      "python: a uint8 field the package hands out as float32 normalised by dataset.mean/std, "  \
      "which the config must then set (\"\": none, every field as the Dataset made it)")         \
    X("dataset.python.version", STR, py_version, "", 0, 0,                                         \
      "python: your Dataset's version, part of the cache's fingerprint: change it to rebuild")    \
    X("dataset.python.interpreter", PROG, py_interp, "python3", 0, 0,                               \
      "python: the interpreter of the loaders and the probe (a name on PATH, or a path): the "     \
      "one whose packages your Dataset imports")                                                  \
    X("cache.enabled", BOOL, cache_enabled, "false", 0, 0,                                         \
      "keep preprocessed samples in an LMDB cache: later epochs and runs read them from there")  \
    X("cache.path", PATH, cache_path, "", 0, 0,                                                    \
      "folder of the LMDB environment; unset: one per dataset, NAME-HASH in "                     \
      "$XDG_CACHE_HOME/zeus-pipe (~/.cache/zeus-pipe), and under Slurm node-local in "             \
      "zeus-pipe-UID in $SLURM_TMPDIR, $TMPDIR or /tmp")                                           \
    X("cache.max_bytes", SIZE, cache_max_bytes, "4GiB", 1048576, 1099511627776.0,                  \
      "largest size the LMDB map may grow to; when full, caching stops and the run goes on")     \
    X("cache.commit_every", INT, commit_every, "1024", 1, 1000000,                                 \
      "samples per write transaction (a transaction also commits after 100 ms)")                  \
    X("cache.on_mismatch", ENUM, on_mismatch, "error", "error|rebuild", 0,                         \
      "when the cache was built from another dataset or transform: stop, or rebuild it")         \
    X("cache.encoding", ENUM, cache_encoding, "raw", "raw|jpeg", 0,                               \
      "whole train images (dataset.image.cache_side): kept as raw RGB, or re-encoded as JPEG "    \
      "(about a fifth of the size) that the prefetch readers decode")                             \
    X("cache.jpeg_quality", INT, jpeg_quality, "90", 1, 100,                                       \
      "cache.encoding jpeg: the quality of the re-encoded images")                                \
    X("transport.kind", ENUM, transport, "ipc", "ipc|tcp", 0,                                     \
      "ipc: loaders on this host only; tcp: also loaders on other hosts (CURVE-authenticated)")   \
    X("transport.bind", STR, bind, "0.0.0.0:5555", 0, 0,                                          \
      "tcp: host:port where the cache stage takes remote loaders; under Slurm rank 0 also "       \
      "takes fetches, events and the ranks' sum on the next three ports")                          \
    X("transport.allowed_keys", STR, allowed_keys, "keys", 0, 0,                                   \
      "tcp: folder of the public keys (NAME.pub, from zeus-pipe keygen) let in")                  \
    X("loader.workers", INT, loader_workers, "2", 1, 256, "number of loader processes")            \
    X("loader.task_size", INT, task_size, "256", 1, 65536,                                          \
      "samples per task a loader receives from the cache stage")                                  \
    X("loader.credit", INT, credit, "2", 1, 64, "tasks a loader may hold at once")                 \
    X("loader.on_error", ENUM, on_error, "error", "error|skip", 0,                                  \
      "a sample that cannot be loaded: stop the run naming it, or skip it (counted and reported)") \
    X("loader.heartbeat_ms", INT, heartbeat_ms, "1000", 10, 600000,                                \
      "a loader and the cache stage send each other a heartbeat when silent this long")           \
    X("loader.liveness", INT, liveness, "3", 1, 100,                                               \
      "heartbeats missed before a loader (or, for a loader, the cache stage) counts as dead")     \
    X("loader.max_restarts_per_min", INT, max_restarts, "10", 0, 10000,                            \
      "loaders that died before delivering samples restarted per minute; past it the run goes on with fewer") \
    X("loader.autoscale", BOOL, autoscale, "false", 0, 0,                                        \
      "add a loader while the trainer waits for data and the loaders are busy; retire to "        \
      "loader.min_workers while they sit idle (loader.workers is then the start count)")          \
    X("loader.min_workers", INT, min_workers, "1", 1, 256, "autoscale: fewest loaders")            \
    X("loader.max_workers", INT, max_workers, "0", 0, 256,                                         \
      "autoscale: most loaders (0 = the cores the cache, prefetch and trainer stages leave free)") \
    X("loader.autoscale_interval_s", INT, autoscale_interval_s, "3", 1, 3600,                      \
      "autoscale: seconds between two looks at the counters (at most one change each)")          \
    X("loader.autoscale_wait", FLOAT, autoscale_wait, "0.10", 0, 1,                                \
      "autoscale: share of its time the trainer may wait for data before a loader is added")      \
    X("prefetch.batch_size", INT, batch_size, "256", 1, 65536, "samples per batch")                \
    X("prefetch.depth", INT, depth, "2", 1, 64,                                                    \
      "batch slots in the shared-memory ring (2 = double buffering)")                             \
    X("prefetch.window", INT, window, "6", 0, 256,                                                 \
      "batches fetched ahead of the ring; their samples wait in received messages until a slot frees") \
    X("prefetch.readers", INT, readers, "2", 1, 16,                                                \
      "threads that read cache hits into the ring: a batch's crops and decodes on all of them, "  \
      "its samples on one per 512 KiB (1 = the prefetch thread alone)")                         \
    X("prefetch.fetch_timeout_s", INT, fetch_timeout_s, "300", 1, 86400,                           \
      "seconds the next batch may wait for samples with none arriving before the run stops, "    \
      "naming what it waits for (every loader stuck, refused or gone)")                          \
    X("prefetch.shuffle", BOOL, shuffle, "true", 0, 0,                                             \
      "draw a seeded permutation of the train split every epoch")                                 \
    X("prefetch.drop_last", BOOL, drop_last, "false", 0, 0,                                        \
      "drop the last batch of an epoch when it is short")                                         \
    X("trainer.backend", ENUM, backend, "cpu", "cpu|null|cuda|auto", 0,                           \
      "cpu trains with OpenBLAS, cuda on GPU 0 (CUDA_VISIBLE_DEVICES picks it), auto: cuda when " \
      "a GPU is found, else cpu; null only counts batches (for benchmarks)")                      \
    X("trainer.model.hidden", INTS, hidden, "[256, 128]", 1, 65536,                                \
      "sizes of the hidden layers of the multilayer perceptron ([] = linear model)")             \
    X("trainer.optimizer.name", ENUM, optimizer, "sgd", "sgd|adamw", 0,                            \
      "SGD with momentum and L2 weight decay, or AdamW (decoupled weight decay)")                \
    X("trainer.optimizer.lr", FLOAT, lr, "0.05", 1e-9, 10, "learning rate")                        \
    X("trainer.optimizer.momentum", FLOAT, momentum, "0.9", 0, 0.999, "momentum factor")          \
    X("trainer.optimizer.weight_decay", FLOAT, weight_decay, "0.0001", 0, 1,                       \
      "L2 penalty added to the gradient of every weight matrix")                                  \
    X("trainer.optimizer.betas", FLOATS, betas, "[0.9, 0.999]", 0, 0.9999999,                      \
      "AdamW's decay rates of the first and second moments")                                      \
    X("trainer.optimizer.eps", FLOAT, eps, "1e-8", 1e-12, 1, "AdamW's term added to the denominator") \
    X("trainer.schedule.name", ENUM, schedule, "none", "none|step|cosine", 0,                      \
      "learning-rate schedule: constant, times gamma every step_epochs, or cosine to min_lr")    \
    X("trainer.schedule.warmup_steps", INT, warmup_steps, "0", 0, 100000000,                       \
      "steps of linear warm-up from lr/warmup_steps to lr")                                       \
    X("trainer.schedule.step_epochs", INT, step_epochs, "10", 1, 100000,                           \
      "step schedule: epochs between two multiplications by gamma")                               \
    X("trainer.schedule.gamma", FLOAT, gamma, "0.1", 1e-6, 1, "step schedule: factor")             \
    X("trainer.schedule.min_lr", FLOAT, min_lr, "0", 0, 10, "cosine schedule: the final learning rate") \
    X("trainer.epochs", INT, epochs, "10", 0, 100000,                                              \
      "passes over the train split; a program's loop (trainer.command, a Python-first script) "    \
      "decides and this caps it: 0 = no cap (the built-in trainer needs 1 or more)")            \
    X("trainer.limit_train_batches", INT, limit_train_batches, "0", 0, 1000000000,                 \
      "train on at most this many batches per epoch (0 = all)")                                   \
    X("trainer.limit_test_batches", INT, limit_test_batches, "0", 0, 1000000000,                   \
      "evaluate at most this many batches per epoch (0 = all)")                                   \
    X("trainer.log_every_steps", INT, log_every_steps, "50", 1, 1000000,                           \
      "steps between two train metric records")                                                   \
    X("trainer.threads", INT, threads, "1", 1, 256, "OpenBLAS threads of the cpu backend")         \
    X("trainer.gpus", INT, gpus, "1", 1, 64,                                                       \
      "data-parallel ranks on this node, each a prefetch and a trainer with its own shard and ring; " \
      "gradients summed every step (NCCL with cuda, rank 0 over ZeroMQ with cpu)")                 \
    X("trainer.command", STRS, trainer_command, "[]", 0, 0,                                       \
      "a program to run as each rank's trainer instead of the built-in one, as a list "           \
      "([\"python3\", \"train.py\"]), run in the config file's folder ([] = the built-in MLP)")     \
    X("trainer.comm_timeout_s", INT, comm_timeout_s, "300", 1, 86400,                              \
      "how long a rank waits for the others in a gradient sum before it stops the run")            \
    X("trainer.checkpoint.every_epochs", INT, ckpt_every_epochs, "1", 0, 100000,                   \
      "write a checkpoint after every N epochs (0 = never)")                                      \
    X("trainer.checkpoint.every_steps", INT, ckpt_every_steps, "0", 0, 100000000,                  \
      "write a checkpoint after every N train steps, mid-epoch too (0 = never)")                  \
    X("trainer.checkpoint.keep", ENUM, ckpt_keep, "best", "last|best|all", 0,                      \
      "keep checkpoints/last.ckpt; also best.ckpt (by test accuracy); also epoch-N.ckpt (all)")  \
    X("trainer.fast_dev_run", BOOL, fast_dev_run, "false", 0, 0,                                   \
      "one train batch and one test batch, no checkpoint: a quick check that everything is wired") \
    X("trainer.debug.nan_at_step", INT, nan_at_step, "0", 0, 1000000000,                           \
      "put a NaN into the first layer's weight gradient at this step (0 = never), to test the guard") \
    X("trainer.debug.log_batches", BOOL, log_batches, "false", 0, 0,                               \
      "append every train batch (epoch, index, step, digests of its indices and pixels; each "   \
      "sample's crop when dataset.augment.resized_crop cuts it from a whole image) to batches.log") \
    X("logger.stat_interval_ms", INT, stat_interval_ms, "1000", 50, 600000,                        \
      "how often every stage reports its counters")                                               \
    X("logger.tensorboard", BOOL, tensorboard, "true", 0, 0,                                       \
      "write TensorBoard scalars (losses, accuracy, rates, each stage's busy and waits, log()) to " \
      "RUN/tb/ for `tensorboard --logdir runs/`")                                           \
    X("logger.trace_max_events", INT, trace_max_events, "200000", 100, 100000000,                  \
      "most timed, instant and counter events in trace.json; past it the first and the last halves are kept") \
    X("slurm.requeue", BOOL, slurm_requeue, "false", 0, 0,                                         \
      "under sbatch, after SIGUSR1 saved the run (--signal=USR1@SECONDS): requeue the job "      \
      "(scontrol requeue); the requeued job's `up` resumes the run by itself")

#endif
