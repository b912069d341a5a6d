/* cmd_up.c — `zeus-pipe up CONFIG [KEY=VALUE ...]`, `up --attach CONFIG ...`
 * and `up --resume RUN [trainer.gpus=N]`:
 * the arguments; the run itself is the supervisor's (pipeline/supervisor/). */
#include "pipeline/cli/cmd.h"
#include "pipeline/supervisor/supervisor.h"

#include <stdio.h>
#include <string.h>

static int usage(FILE *out, int status)
{
    fprintf(out,
            "usage: zeus-pipe up CONFIG [KEY=VALUE ...]\n"
            "       zeus-pipe up --attach CONFIG [KEY=VALUE ...]\n"
            "       zeus-pipe up --resume RUN [trainer.gpus=N] [loader.workers=N]\n\n"
            "Runs the training pipeline described by CONFIG: loaders, cache, prefetch,\n"
            "trainer and logger processes. KEY=VALUE overrides a config key, e.g.\n"
            "loader.workers=4 trainer.optimizer.lr=0.05 (see `zeus-pipe config --keys`).\n"
            "The run's files go to run.dir/run.name (default runs/<config name>).\n"
            "--resume RUN goes on from RUN's checkpoints/last.ckpt, in the same run\n"
            "directory and with its config: the same batches an uninterrupted run trains on.\n"
            "trainer.gpus=N resumes with another number of ranks: the rest of the cut epoch\n"
            "is sharded over the N ranks (every sample of it still exactly once), the\n"
            "later epochs over N from their start; the run's config.yaml says N from then.\n"
            "loader.workers=N changes the number of loaders (they do not shape the order).\n"
            "Ctrl-C stops every stage within 2 s. SIGUSR1 (Slurm's --signal=USR1@SECONDS)\n"
            "saves and stops: the trainer finishes its step and writes checkpoints/last.ckpt\n"
            "there (under Slurm the limit's SIGTERM does too). Exit: 0 done, 1 a stage\n"
            "failed, 2 bad config, 3 stopped by `zeus-pipe down`, 4 stopped by SIGUSR1 after\n"
            "saving, 128+N stopped by signal N.\n\n"
            "--attach runs every stage but the trainer: the trainer.gpus ranks are programs\n"
            "that attach to the run (zp_client_attach of libzeuspipe.so; in Python\n"
            "zeus_pipe.attach(run=DIR, rank=R)). The run directory is printed on stdout\n"
            "first, as one line ZP_RUN=<dir>. The run ends when every rank has had all its\n"
            "epochs and detached, and stops every stage when the process that started `up`\n"
            "exits, however it exits (what Python's zeus_pipe.attach(config=...) relies on).\n\n"
            "Under Slurm (`srun zeus-pipe up CONFIG`, with SLURM_PROCID, SLURM_NTASKS,\n"
            "SLURM_LOCALID and SLURM_NODELIST set) every task is one rank: rank 0 runs\n"
            "the cache and logger on tcp (transport.bind's port and the next three, with\n"
            "CURVE), the others run their loaders, prefetch and trainer in RUN/rank-<r>/\n"
            "and connect to it. run.dir must be on a filesystem every node sees.\n");
    return status;
}

int cmd_up(int argc, char **argv)
{
    if (zp_cmd_wants_help(argc, argv))
        return usage(stdout, 0);
    zp_sup_catch_save();
    if (argc >= 2 && !strcmp(argv[1], "--resume"))
        return argc >= 3 ? zp_up_resume(argv[2], argv + 3, argc - 3) : usage(stderr, 2);
    int attach = 0, n = 0;
    for (int i = 0; i < argc; i++) /* --attach anywhere after `up`; the rest in order */
        if (i > 0 && !strcmp(argv[i], "--attach"))
            attach = 1;
        else
            argv[n++] = argv[i];
    if (attach && n >= 2 && !strcmp(argv[1], "--resume")) {
        fprintf(stderr, "zeus-pipe: up: --attach and --resume do not go together: resume with "
                        "`up --resume RUN`\n");
        return 2;
    }
    static zp_config_t cfg;
    zp_dataset_t *ds;
    int rc = zp_sup_load(n, argv, NULL, &cfg, &ds);
    if (rc)
        return rc < 0 ? usage(stderr, 2) : rc;
    char err[512];
    if (!attach && !cfg.trainer_command.n && cfg.epochs == 0) {
        fprintf(stderr, "zeus-pipe: %s: trainer.epochs: 0 (no cap) is for a program's loop "
                        "(trainer.command, a Python-first script); the built-in trainer needs 1 or "
                        "more\n", cfg.file);
        zp_dataset_destroy(&ds);
        return 2;
    }
    if (!attach && !cfg.trainer_command.n && cfg.backend != ZP_BACKEND_NULL &&
        zp_dataset_builtin_fields(&ds->meta, err, sizeof err)) {
        fprintf(stderr, "zeus-pipe: %s: %s\n", cfg.file, err);
        zp_dataset_destroy(&ds);
        return 2;
    }
    rc = attach ? zp_up_attach(&cfg, ds) : zp_up(&cfg, ds);
    zp_dataset_destroy(&ds);
    return rc;
}
