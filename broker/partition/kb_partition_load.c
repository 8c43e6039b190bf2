#include "kb_partition_load.h"

#include <string.h>
#include <time.h>

#include "kb_producer_snapshot.h"

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Restores the producer state of ld->log into ld->pids: the newest usable
 * .snapshot, then the batches past it (kb_producer_snapshot.h). */
static kp_err rebuild_producer_state(kb_partition_load *ld)
{
    ld->pids = kb_producer_state_new();
    if (ld->pids == NULL)
        return KP_ERR__NOMEM;
    return kb_producer_snapshot_restore(ld->io, ld->log, ld->pids, &ld->snap);
}

void kb_partition_load_run(kb_partition_load *ld)
{
    int64_t start = mono_ms();
    ld->log = NULL;
    ld->pids = NULL;
    ld->failed = NULL;
    memset(&ld->ctx, 0, sizeof(ld->ctx));
    ks_recover_report_init(&ld->rep);
    ld->err = ks_log_open(ld->io, ld->dir, ld->topic, ld->partition, &ld->lc, &ld->args, &ld->log,
                          &ld->rep, &ld->ctx);
    if (ld->err != KP_ERR_NONE) {
        ld->log = NULL;
        ld->failed = "open log";
    } else {
        if (ld->cleaner_offset >= 0)
            ks_log_set_cleaner_offset(ld->log, ld->cleaner_offset);
        ld->err = rebuild_producer_state(ld);
        if (ld->err != KP_ERR_NONE) {
            ld->failed = "rebuild producer state";
            kb_partition_load_discard(ld);
        }
    }
    ld->took_ms = mono_ms() - start;
}

void kb_partition_load_discard(kb_partition_load *ld)
{
    kb_producer_state_free(ld->pids);
    ld->pids = NULL;
    if (ld->log != NULL)
        (void)ks_log_close(ld->log, NULL);
    ld->log = NULL;
}
