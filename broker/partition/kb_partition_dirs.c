/* Partition directories made and removed on the helper threads (kb_partition_dirs.h). */
#include "kb_partition_dirs.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kb_file.h"
#include "kb_log.h"
#include "kb_topics.h"
#include "kb_work.h"

/* ---- the filesystem steps (any thread) ---------------------------------- */

static kp_err errno_err(int err)
{
    return err == ENOSPC ? KP_ERR__NOSPC : KP_ERR__IO;
}

static kp_err dir_fsync(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return KP_ERR__IO;
    kp_err e = fsync(fd) == 0 ? KP_ERR_NONE : errno_err(errno);
    close(fd);
    return e;
}

kp_err kb_partition_dirs_make(const char *dir, const char *topic, const kp_uuid *id, int32_t from,
                     int32_t to)
{
    char path[4096], id_s[23], body[128];
    kb_uuid_format(id, id_s);
    int len = snprintf(body, sizeof(body), "version: 0\ntopic_id: %s\n", id_s);
    for (int32_t p = from; p < to; p++) {
        snprintf(path, sizeof(path), "%s/%s-%d", dir, topic, p);
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return errno_err(errno);
        kp_err e = kb_file_write_atomic(path, "partition.metadata", body, (size_t)len);
        if (e != KP_ERR_NONE)
            return e;
    }
    return from < to ? dir_fsync(dir) : KP_ERR_NONE;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

kp_err kb_partition_dirs_remove(const char *dir, const char *topic, int32_t from, int32_t to)
{
    char path[4096];
    kp_err e = KP_ERR_NONE;
    for (int32_t p = from; p < to; p++) {
        snprintf(path, sizeof(path), "%s/%s-%d", dir, topic, p);
        if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
            e = KP_ERR__IO; /* keep going: remove what can be removed */
    }
    kp_err se = from < to ? dir_fsync(dir) : KP_ERR_NONE;
    return e != KP_ERR_NONE ? e : se;
}

/* ---- jobs: one topic, in steps ------------------------------------------- */

typedef struct kb_partition_dirs_job {
    kb_broker *b;
    kb_topic *t;          /* loop side only */
    kb_partition_dirs_done *done;  /* may be NULL */
    void *arg;
    bool removing;        /* removing directories (delete, or a failed create or grow) */
    bool rollback;        /* removing what a failed create or grow made */
    bool growing;         /* a partition increase (t->growing is this job) */
    kp_err failure;       /* why the create or grow failed (rollback) */
    /* a delete that came during the grow, started when it ends */
    bool delete_deferred;
    kb_partition_dirs_done *delete_done;
    void *delete_arg;
    /* what the helper thread reads and writes */
    const char *dir;      /* the first log dir: process lifetime */
    char *name;           /* a copy of t->name */
    kp_uuid id;
    int32_t base;         /* the first partition the job makes or removes */
    int32_t from, to;     /* this step's partitions */
    int32_t total;        /* partitions to go through: [base, total) */
    kp_err err;           /* this step's result */
} pdirs_job;

static void job_free(pdirs_job *j)
{
    free(j->name);
    free(j);
}

/* Runs on a helper thread: touches only the job. */
static void job_step(void *arg)
{
    pdirs_job *j = arg;
    if (j->removing)
        j->err = kb_partition_dirs_remove(j->dir, j->name, j->from, j->to);
    else
        j->err = kb_partition_dirs_make(j->dir, j->name, &j->id, j->from, j->to);
}

static void job_after_step(void *arg);
static void job_roll_back(pdirs_job *j);

/* Queues the step starting at from; false if the pool refused it. */
static bool job_submit(pdirs_job *j, int32_t from)
{
    j->from = from;
    j->to = j->total - from > KB_PARTITION_DIRS_STEP ? from + KB_PARTITION_DIRS_STEP : j->total;
    return kb_work_submit(j->b, job_step, job_after_step, j) == KP_ERR_NONE;
}

static kp_err job_start(kb_broker *b, kb_topic *t, bool removing, kb_partition_dirs_done *done,
                        void *arg);

/* A grow is over (made, rolled back or stopped): t is free for the delete
 * that waited for it, if any. */
static void grow_over(pdirs_job *j, kp_err err)
{
    j->t->growing = NULL;
    if (j->done != NULL)
        j->done(j->arg, err);
    if (j->delete_deferred) {
        kp_err e = err == KP_ERR__CLOSED ? err
                                         : job_start(j->b, j->t, true, j->delete_done,
                                                     j->delete_arg);
        if (e != KP_ERR_NONE && j->delete_done != NULL)
            j->delete_done(j->delete_arg, e);
    }
    job_free(j);
}

/* The last step of a grow: the topic gets its partitions, or (deleted
 * meanwhile, or the registry cannot say so) the directories go again. */
static void grow_end(pdirs_job *j, kp_err err)
{
    if (err == KP_ERR_NONE && !j->rollback) {
        if (j->t->state != KB_TOPIC_READY)
            j->err = KP_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        else
            j->err = kb_topics_end_add_partitions(j->b->topics, j->t, j->total);
        if (j->err != KP_ERR_NONE) {
            job_roll_back(j);
            return;
        }
    }
    grow_over(j, err);
}

/* The last step is done (or the job cannot go on): tell registry and caller. */
static void job_end(pdirs_job *j, kp_err err)
{
    kb_topics *ts = j->b->topics;
    if (j->growing) {
        grow_end(j, err);
        return;
    }
    if (err == KP_ERR__CLOSED) {
        /* stopping: the registry keeps the topic pending or deleting */
    } else if (j->removing && !j->rollback) {
        if (kb_topics_end_delete(ts, j->t) != KP_ERR_NONE && err == KP_ERR_NONE)
            err = KP_ERR__IO;
    } else if (err == KP_ERR_NONE) {
        if ((j->err = kb_topics_end_create(ts, j->t, true)) != KP_ERR_NONE) {
            job_roll_back(j); /* the registry cannot say it exists: undo */
            return;
        }
    } else {
        (void)kb_topics_end_create(ts, j->t, false);
    }
    if (j->done != NULL)
        j->done(j->arg, err);
    job_free(j);
}

/* A create or grow step failed: remove what it made, then drop the topic
 * (create) or leave it as it was (grow). */
static void job_roll_back(pdirs_job *j)
{
    KB_LOG(KB_LL_WARN, KB_SUB_STORAGE,
           "msg=\"creating partition directories failed\" topic=%s partitions=%d-%d error=%s",
           j->name, j->base, j->to - 1, kp_err_name(j->err));
    j->failure = j->err;
    j->removing = true;
    j->rollback = true;
    j->total = j->to;
    if (!job_submit(j, j->base))
        job_end(j, j->failure);
}

static void job_after_step(void *arg)
{
    pdirs_job *j = arg;
    if (j->err != KP_ERR_NONE && !j->removing) {
        job_roll_back(j);
        return;
    }
    if (j->err != KP_ERR_NONE)
        KB_LOG(KB_LL_WARN, KB_SUB_STORAGE,
               "msg=\"removing partition directories failed\" topic=%s partitions=%d-%d",
               j->name, j->from, j->to - 1);
    if (j->to >= j->total) {
        job_end(j, j->rollback ? j->failure : KP_ERR_NONE);
        return;
    }
    if (!job_submit(j, j->to))
        job_end(j, j->rollback ? j->failure : KP_ERR__CLOSED);
}

static pdirs_job *job_new(kb_broker *b, kb_topic *t, bool removing, kb_partition_dirs_done *done,
                          void *arg)
{
    pdirs_job *j = calloc(1, sizeof(*j));
    if (j == NULL)
        return NULL;
    j->name = strdup(t->name);
    if (j->name == NULL) {
        free(j);
        return NULL;
    }
    j->b = b;
    j->t = t;
    j->done = done;
    j->arg = arg;
    j->removing = removing;
    j->dir = kb_topics_dir(b->topics);
    j->id = t->id;
    j->total = t->npartitions;
    return j;
}

/* Starts a job on t; on failure nothing is queued. */
static kp_err job_start(kb_broker *b, kb_topic *t, bool removing, kb_partition_dirs_done *done, void *arg)
{
    pdirs_job *j = job_new(b, t, removing, done, arg);
    if (j == NULL)
        return KP_ERR__NOMEM;
    if (!job_submit(j, 0)) {
        job_free(j);
        return KP_ERR__CLOSED;
    }
    return KP_ERR_NONE;
}

kp_err kb_partition_dirs_create(kb_broker *b, kb_topic *t, kb_partition_dirs_done *done, void *arg)
{
    KB_ASSERT(t->state == KB_TOPIC_CREATING);
    kp_err e = job_start(b, t, false, done, arg);
    if (e != KP_ERR_NONE)
        (void)kb_topics_end_create(b->topics, t, false); /* nothing was made */
    return e;
}

kp_err kb_partition_dirs_delete(kb_broker *b, kb_topic *t, kb_partition_dirs_done *done, void *arg)
{
    KB_ASSERT(t->state == KB_TOPIC_DELETING);
    pdirs_job *g = t->growing;
    if (g != NULL) { /* after the grow: it sees the topic deleting and undoes itself */
        KB_ASSERT(!g->delete_deferred);
        g->delete_deferred = true;
        g->delete_done = done;
        g->delete_arg = arg;
        return KP_ERR_NONE;
    }
    return job_start(b, t, true, done, arg);
}

kp_err kb_partition_dirs_grow(kb_broker *b, kb_topic *t, int32_t total, kb_partition_dirs_done *done,
                              void *arg)
{
    KB_ASSERT(t->state == KB_TOPIC_READY && t->growing == NULL && total > t->npartitions);
    pdirs_job *j = job_new(b, t, false, done, arg);
    if (j == NULL)
        return KP_ERR__NOMEM;
    j->growing = true;
    j->base = t->npartitions;
    j->total = total;
    if (!job_submit(j, j->base)) {
        job_free(j);
        return KP_ERR__CLOSED;
    }
    t->growing = j;
    return KP_ERR_NONE;
}

kp_err kb_partition_dirs_auto_create(kb_broker *b, kp_str name, int32_t partitions,
                                     kb_topic **out, kb_msgbuf *msg)
{
    if (partitions <= KB_PARTITION_DIRS_STEP)
        return kb_topics_create(b->topics, name, partitions, NULL, 0, false, out, msg);
    kb_topic *t;
    kp_err e = kb_topics_begin_create(b->topics, name, partitions, NULL, 0, false, &t, msg);
    if (e == KP_ERR_NONE)
        e = kb_partition_dirs_create(b, t, NULL, NULL);
    *out = NULL;
    return e;
}

void kb_partition_dirs_resume(kb_broker *b)
{
    /* Collect first: a failing kb_partition_dirs_create drops its topic from the list. */
    size_t n;
    kb_topic *const *busy = kb_topics_busy_all(b->topics, &n);
    if (n == 0)
        return;
    kb_topic **v = calloc(n, sizeof(*v));
    if (v == NULL)
        return; /* they stay pending or deleting until a start with memory */
    memcpy(v, busy, n * sizeof(*v));
    for (size_t i = 0; i < n; i++) {
        kb_topic *t = v[i];
        bool creating = t->state == KB_TOPIC_CREATING;
        char name[KB_TOPIC_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%s", t->name); /* t may be gone after a failure */
        KB_LOG(KB_LL_INFO, KB_SUB_STORAGE, "msg=\"finishing an interrupted topic %s\" topic=%s "
               "partitions=%d", creating ? "create" : "delete", name, t->npartitions);
        kp_err e = creating ? kb_partition_dirs_create(b, t, NULL, NULL) : kb_partition_dirs_delete(b, t, NULL, NULL);
        if (e != KP_ERR_NONE)
            KB_LOG(KB_LL_WARN, KB_SUB_STORAGE, "msg=\"cannot finish the topic change\" topic=%s "
                   "error=%s", name, kp_err_name(e));
    }
    free(v);
}
