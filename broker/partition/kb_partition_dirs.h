/*
 * kb_partition_dirs: partition directories made and removed on the helper threads,
 * so creating or deleting a topic of thousands of partitions never stalls
 * the event loop (and with it every other client).
 *
 * Job: for a topic the registry holds as being created (kb_topics_begin_create)
 * make its `<topic>-<n>/` directories with Kafka's partition.metadata; for
 * one being deleted (kb_topics_begin_delete) remove them with everything
 * they hold; for one growing (CreatePartitions) make the new ones; then tell
 * the registry (kb_topics_end_create / end_delete / end_add_partitions) and
 * the caller. The work runs in steps of KB_PARTITION_DIRS_STEP partitions, each a
 * kb_work job, so other helper-thread work (produce validation) interleaves
 * with a long one.
 *
 * On disk, per partition (under the first log dir):
 *   <topic>-<n>/                     mode 0755
 *   <topic>-<n>/partition.metadata   "version: 0\ntopic_id: <base64 id>\n",
 *                                    written atomically (kb_file)
 * After each step the log dir itself is fsynced, so the directory entries
 * of that step are durable before the registry says the topic exists.
 *
 * Invariants:
 *   1. A topic becomes visible (kb_topics_find) only after every one of its
 *      partition directories and partition.metadata files is durable.
 *   2. A topic's directories are removed only after the registry recorded
 *      it 'deleting'; it is forgotten only after they are all gone.
 *   3. The registry's 'pending' / 'deleting' marks make both idempotent:
 *      kb_partition_dirs_resume, at start, finishes whichever a crash interrupted
 *      (a pending topic is created, a deleting one removed).
 *   4. done(arg, err) runs at most once per call, on the loop thread, after
 *      the registry was updated; not at all when the call returned an error.
 *   5. At most one job works on a topic's directories at a time: a delete
 *      of a growing topic starts when the grow has ended.
 *
 * Ownership: the topic stays owned by the registry; it is not freed while a
 * job refers to it (busy topics are freed only by end_create / end_delete,
 * which this module calls). The helper threads work on copies of the
 * topic's name and id, never on the kb_topic.
 *
 * Threading: kb_partition_dirs_make / kb_partition_dirs_remove on any thread (they block on
 * disk I/O); everything else on the loop thread.
 *
 * Errors: KP_ERR__IO, KP_ERR__NOSPC (making), KP_ERR__NOMEM, and
 * KP_ERR__CLOSED to done when the broker stopped first (the topic stays
 * pending or deleting in the registry and is finished at the next start).
 */
#ifndef KB_PARTITION_DIRS_H
#define KB_PARTITION_DIRS_H

#include <stdint.h>

#include "kb_context.h"
#include "kb_msgbuf.h"
#include "kb_uuid.h"
#include "kp_types.h"

#define KB_PARTITION_DIRS_STEP 32 /* partitions per helper-thread job */

struct kb_topic;

/* Makes dir/<topic>-<p>/partition.metadata for p in [from, to). Any thread. */
kp_err kb_partition_dirs_make(const char *dir, const char *topic, const kp_uuid *id, int32_t from,
                     int32_t to);
/* Removes dir/<topic>-<p>/ and its contents for p in [from, to); a missing
 * one is no error. Any thread. */
kp_err kb_partition_dirs_remove(const char *dir, const char *topic, int32_t from, int32_t to);

typedef void kb_partition_dirs_done(void *arg, kp_err err);

/* Makes the directories of t (KB_TOPIC_CREATING) on the helper threads,
 * then publishes t (kb_topics_end_create(ok)), or on failure removes what
 * was made and drops t, and calls done(arg, err) (done may be NULL). On an
 * immediate error t is dropped already and done is not called. */
kp_err kb_partition_dirs_create(kb_broker *b, struct kb_topic *t, kb_partition_dirs_done *done, void *arg);

/* Removes the directories of t (KB_TOPIC_DELETING) on the helper threads,
 * then forgets t (kb_topics_end_delete) and calls done(arg, err). On an
 * immediate error t stays 'deleting' (finished at the next start) and done
 * is not called. */
kp_err kb_partition_dirs_delete(kb_broker *b, struct kb_topic *t, kb_partition_dirs_done *done, void *arg);

/* Makes the directories of partitions [t->npartitions, total) of a visible
 * topic on the helper threads, then grows t (kb_topics_end_add_partitions)
 * and calls done(arg, err). Until then t has its old partitions and
 * t->growing is set. A delete that comes meanwhile (kb_partition_dirs_delete)
 * waits for the grow, which then removes what it made and ends with
 * UNKNOWN_TOPIC_OR_PARTITION. A crash or stop in between leaves t as it was
 * (empty directories beyond its partitions are made again, or ignored).
 * On an immediate error nothing was started and done is not called. */
kp_err kb_partition_dirs_grow(kb_broker *b, struct kb_topic *t, int32_t total,
                              kb_partition_dirs_done *done, void *arg);

/* Auto-creation (Metadata, Produce): a topic of at most KB_PARTITION_DIRS_STEP
 * partitions (one step's work, the common num.partitions) is created here
 * and now (*out set); a larger one is recorded pending and its directories
 * made on the helper threads (*out NULL: the caller answers a retriable
 * error and the client asks again), so num.partitions=1000 stalls nobody.
 * Errors as kb_topics_create's. */
kp_err kb_partition_dirs_auto_create(kb_broker *b, kp_str name, int32_t partitions,
                                     struct kb_topic **out, kb_msgbuf *msg);

/* Finishes, in the background, every create or delete a crash interrupted
 * (the registry's pending and deleting topics). After kb_work_start. */
void kb_partition_dirs_resume(kb_broker *b);

#endif
