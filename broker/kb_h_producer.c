/* Handler for InitProducerId (idempotent producers), and the producer id
 * allocator behind it: ids are handed out from blocks reserved durably in
 * the log dir, so no id is ever reused across restarts. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "kb_broker.h"
#include "kb_dispatch.h"
#include "kb_log.h"
#include "kb_plog.h"
#include "ks_io.h"

#define PID_FILE "runnel-producer-ids"
#define PID_BLOCK 1000

/* Reserves the next block of ids: the file records the first id not yet reserved. */
static kp_err reserve_block(kb_broker *b)
{
    const char *dir = b->cfg->log_dirs.v[0];
    if (b->pid_block_end == 0) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, PID_FILE);
        FILE *f = fopen(path, "re");
        int64_t next = 0;
        if (f != NULL) {
            if (fscanf(f, "next=%" SCNd64, &next) != 1 || next < 0)
                next = 0;
            fclose(f);
        }
        b->next_pid = next;
        b->pid_block_end = next;
    }
    char body[64];
    int len = snprintf(body, sizeof(body), "next=%" PRId64 "\n", b->pid_block_end + PID_BLOCK);
    kp_err e = ks_io_write_file_atomic(kb_plog_io(b), dir, PID_FILE, body, (size_t)len, NULL);
    if (e == KP_ERR_NONE)
        b->pid_block_end += PID_BLOCK;
    return e;
}

static kp_err next_producer_id(kb_broker *b, int64_t *pid)
{
    if (b->next_pid >= b->pid_block_end) {
        kp_err e = reserve_block(b);
        if (e != KP_ERR_NONE)
            return e;
    }
    *pid = b->next_pid++;
    return KP_ERR_NONE;
}

kp_err kb_h_init_producer_id(kb_req *req, const kp_init_producer_id_req *rq,
                             kp_init_producer_id_resp *rs)
{
    if (rq->transactional_id.len >= 0) {
        KB_LOG(KB_LL_WARN, KB_SUB_MAIN, "msg=\"transactional producers are not supported yet\" "
               "conn=%llu", (unsigned long long)req->conn->id);
        rs->error_code = KP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return KP_ERR_NONE;
    }
    /* Without a transactional id Kafka always hands out a fresh id, epoch 0. */
    kp_err e = next_producer_id(req->broker, &rs->producer_id);
    if (e != KP_ERR_NONE) {
        rs->error_code = kp_err_to_wire(e);
        rs->producer_id = -1;
        return KP_ERR_NONE;
    }
    rs->producer_epoch = 0;
    return KP_ERR_NONE;
}
