/*
 * kb_group_impl: what the classic-group files share inside the group room
 * and nowhere else: kb_group.c (the state machine) and kb_group_rec.c
 * (queries and the __consumer_offsets group records).
 *
 * Invariants and ownership: those of kb_group.h; these functions keep
 * them (a member's bytes stay counted, strings are copied in).
 * Threading: loop thread only.
 */
#ifndef KB_GROUP_IMPL_H
#define KB_GROUP_IMPL_H

#include "kb_group.h"

void kbg_member_free(kb_group_member *m);
/* The bytes a member holds against KB_GROUP_MAX_BYTES. */
size_t kbg_member_bytes(const kb_group_member *m);
kp_err kbg_member_set_assignment(kb_group *g, kb_group_member *m, kp_slice a);
/* Replaces *field with a copy of v (NULL clears it). */
kp_err kbg_set_owned(char **field, const char *v);
/* Adds a member without waking anyone (joins and record loading). */
kp_err kbg_add_member_quiet(kb_group *g, const kp_join_group_req *rq, const kb_group_client *cl,
                            const char *member_id, int64_t now);

#endif
