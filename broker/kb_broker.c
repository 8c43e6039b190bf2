#include "kb_broker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kb_acl.h"
#include "kb_admin.h"
#include "kb_console.h"
#include "kb_cluster.h"
#include "kb_dispatch.h"
#include "kb_group_coord.h"
#include "kb_log.h"
#include "kb_longpoll.h"
#include "kb_partition_dirs.h"
#include "kb_partition_log.h"
#include "kb_req.h"
#include "kb_scram_store.h"
#include "kb_observe.h"
#include "kb_server.h"
#include "kb_share_coord.h"
#include "kb_txn_coord.h"
#include "kb_topics.h"
#include "kb_work.h"

/* In cluster mode the first signal begins a controlled shutdown (the loop
 * stops once the controller has moved this broker's leaderships); a second
 * one, or a broker not serving in a cluster, stops at once. */
static void on_signal(kb_loop *loop, int fd, unsigned events, void *arg)
{
    (void)events;
    kb_broker *b = arg;
    struct signalfd_siginfo si;
    if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"shutting down\" signal=%s",
               si.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
        if (!kb_cluster_begin_shutdown(b->cluster))
            kb_loop_stop(loop);
    }
}

/* SIGTERM and SIGINT arrive through a signalfd; SIGPIPE is ignored. */
static kp_err signals_setup(kb_broker *b)
{
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0)
        return KP_ERR__IO;
    signal(SIGPIPE, SIG_IGN);
    b->signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (b->signal_fd < 0)
        return KP_ERR__IO;
    return kb_loop_add_fd(b->loop, b->signal_fd, KB_EV_READ, on_signal, b);
}

kp_err kb_broker_start(kb_broker *b, const kb_config *cfg, char *err, size_t errlen)
{
    memset(b, 0, sizeof(*b));
    b->cfg = cfg;
    b->node_id = cfg->node_id;
    b->signal_fd = -1;
    b->loop = kb_loop_new();
    if (b->loop == NULL) {
        snprintf(err, errlen, "cannot create the event loop: %s", strerror(errno));
        return KP_ERR__IO;
    }
    if (signals_setup(b) != KP_ERR_NONE) {
        snprintf(err, errlen, "cannot set up signal handling: %s", strerror(errno));
        return KP_ERR__IO;
    }
    kp_err e;
    if (kb_cluster_enabled(cfg) && (e = kb_cluster_check(cfg, err, errlen)) != KP_ERR_NONE)
        return e; /* before kb_topics_open, which would write a meta.properties */
    e = kb_topics_open(cfg, &b->topics, err, errlen);
    if (e != KP_ERR_NONE)
        return e;
    snprintf(b->cluster_id, sizeof(b->cluster_id), "%.63s", kb_topics_cluster_id(b->topics));
    if ((e = kb_admin_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_partition_log_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_longpoll_start(b)) != KP_ERR_NONE)
        return e;
    if ((e = kb_work_start(b, 1)) != KP_ERR_NONE) {
        snprintf(err, errlen, "cannot start the helper threads");
        return e;
    }
    kb_partition_dirs_resume(b); /* topics a crash left half created or half deleted */
    if ((e = kb_group_coord_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_share_coord_load(b, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_txn_coord_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_scram_store_open(cfg->log_dirs.v[0], &b->scram, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_acl_open(cfg, cfg->log_dirs.v[0], &b->acl, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_observe_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    b->dispatch = kb_dispatch;
    e = kb_server_start(b, &b->server, err, errlen);
    if (e != KP_ERR_NONE)
        return e;
    if (kb_cluster_enabled(cfg) && (e = kb_cluster_start(b, &b->cluster, err, errlen)) != KP_ERR_NONE)
        return e;
    if ((e = kb_console_start(b, err, errlen)) != KP_ERR_NONE)
        return e;
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"broker started\" node_id=%d cluster_id=%s topics=%zu",
           b->node_id, b->cluster_id, kb_topics_count(b->topics));
    return KP_ERR_NONE;
}

kp_err kb_broker_run(kb_broker *b)
{
    kp_err e = kb_loop_run(b->loop);
    return e == KP_ERR_NONE && kb_cluster_failed(b->cluster) ? KP_ERR__INVAL : e;
}

void kb_broker_stop(kb_broker *b)
{
    kb_console_stop(b);
    kb_observe_stop(b);
    kb_cluster_stop(b->cluster);
    b->cluster = NULL;
    kb_server_stop(b->server);
    b->server = NULL;
    kb_scram_store_free(b->scram);
    b->scram = NULL;
    kb_acl_free(b->acl);
    b->acl = NULL;
    kb_work_stop(b);
    kb_longpoll_stop(b);
    kb_txn_coord_stop(b);
    kb_group_coord_stop(b);
    kb_partition_log_stop(b);
    kb_admin_stop(b);
    kb_topics_close(b->topics);
    b->topics = NULL;
    if (b->signal_fd >= 0) {
        kb_loop_del_fd(b->loop, b->signal_fd);
        close(b->signal_fd);
    }
    kb_loop_free(b->loop);
    b->loop = NULL;
}

