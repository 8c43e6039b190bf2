/* Share-partitions and share sessions of a share group (kb_share_partition.h). */
#include "kb_share_partition.h"

#include <stdlib.h>
#include <string.h>

struct kb_share_parts {
    kb_share_part **v; /* in creation order; found by a linear search */
    int32_t n, cap;
    kb_share_session **sessions;
    int32_t nsessions, sessions_cap;
};

kb_share_parts *kb_share_parts_new(void)
{
    return calloc(1, sizeof(kb_share_parts));
}

static void session_free(kb_share_session *s)
{
    free(s->member_id);
    free(s->parts);
    free(s);
}

void kb_share_parts_free(kb_share_parts *ps)
{
    if (ps == NULL)
        return;
    for (int32_t i = 0; i < ps->n; i++) {
        free(ps->v[i]->rec);
        free(ps->v[i]);
    }
    for (int32_t i = 0; i < ps->nsessions; i++)
        session_free(ps->sessions[i]);
    free(ps->v);
    free(ps->sessions);
    free(ps);
}

uint64_t kb_share_member_key(kp_str member_id)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < member_id.len; i++)
        h = (h ^ (uint8_t)member_id.p[i]) * 0x100000001b3ull;
    return h != 0 ? h : 1;
}

/* Grows *v (of *cap elements of size sz) to hold one more than n. */
static bool grow(void **v, int32_t n, int32_t *cap, size_t sz)
{
    if (n < *cap)
        return true;
    int32_t c = *cap > 0 ? *cap * 2 : 8;
    void *p = realloc(*v, (size_t)c * sz);
    if (p == NULL)
        return false;
    *v = p;
    *cap = c;
    return true;
}

kb_share_part *kb_share_parts_find(const kb_share_parts *ps, const kp_uuid *topic, int32_t part)
{
    for (int32_t i = 0; ps != NULL && i < ps->n; i++)
        if (ps->v[i]->partition == part && memcmp(&ps->v[i]->topic, topic, sizeof(*topic)) == 0)
            return ps->v[i];
    return NULL;
}

kp_err kb_share_parts_get(kb_share_parts *ps, const kp_uuid *topic, int32_t part,
                          int64_t start_offset, kb_share_part **out)
{
    if ((*out = kb_share_parts_find(ps, topic, part)) != NULL)
        return KP_ERR_NONE;
    if (ps->n >= KB_SHARE_PARTS_MAX)
        return KP_ERR__NOMEM;
    if (!grow((void **)&ps->v, ps->n, &ps->cap, sizeof(*ps->v)))
        return KP_ERR__NOMEM;
    kb_share_part *sp = calloc(1, sizeof(*sp));
    if (sp == NULL)
        return KP_ERR__NOMEM;
    sp->topic = *topic;
    sp->partition = part;
    sp->start = sp->end = start_offset;
    sp->persist = (kb_share_persist){.dirty_first = 0, .dirty_last = -1, .snapshot_due = true,
                                     .snapshot_epoch = -1};
    ps->v[ps->n++] = sp;
    *out = sp;
    return KP_ERR_NONE;
}

size_t kb_share_parts_count(const kb_share_parts *ps)
{
    return ps != NULL ? (size_t)ps->n : 0;
}

kb_share_part *kb_share_parts_at(const kb_share_parts *ps, size_t i)
{
    return ps != NULL && i < (size_t)ps->n ? ps->v[i] : NULL;
}

static void session_forget_part(kb_share_session *s, const kb_share_part *sp)
{
    for (int32_t i = 0; i < s->nparts; i++)
        if (s->parts[i] == sp) {
            s->parts[i] = s->parts[--s->nparts];
            return;
        }
}

/* ---- the window ---------------------------------------------------------- */

/* Offset o's persisted state changed. */
static void touch(kb_share_part *sp, int64_t o)
{
    kb_share_persist *p = &sp->persist;
    if (p->dirty_first > p->dirty_last) {
        p->dirty_first = p->dirty_last = o;
    } else if (o < p->dirty_first) {
        p->dirty_first = o;
    } else if (o > p->dirty_last) {
        p->dirty_last = o;
    }
}

static int32_t window(const kb_share_part *sp)
{
    return (int32_t)(sp->end - sp->start);
}

static bool done(const kb_share_rec *r)
{
    return r->state == KB_SR_ACKNOWLEDGED || r->state == KB_SR_ARCHIVED;
}

/* Invariant 2: drops the finished prefix. */
static void advance_start(kb_share_part *sp)
{
    int32_t n = window(sp), k = 0;
    while (k < n && done(&sp->rec[k]))
        k++;
    if (k == 0)
        return;
    memmove(sp->rec, sp->rec + k, (size_t)(n - k) * sizeof(*sp->rec));
    sp->start += k;
    sp->persist.start_moved = true;
}

void kb_share_part_reset(kb_share_part *sp, int64_t offset)
{
    sp->start = sp->end = offset;
    sp->persist.state_epoch++;
    sp->persist.snapshot_due = true;
    sp->persist.dirty_first = 0;
    sp->persist.dirty_last = -1;
}

int64_t kb_share_part_lag(const kb_share_part *sp, int64_t hwm)
{
    if (hwm <= sp->start)
        return 0;
    int64_t lag = hwm - sp->start;
    int64_t upto = hwm < sp->end ? hwm : sp->end;
    for (int64_t o = sp->start; o < upto; o++)
        lag -= done(&sp->rec[o - sp->start]);
    return lag;
}

static int32_t acquired_count(const kb_share_part *sp)
{
    int32_t n = 0;
    for (int32_t i = 0; i < window(sp); i++)
        n += sp->rec[i].state == KB_SR_ACQUIRED;
    return n;
}

int64_t kb_share_part_next_fetch(const kb_share_part *sp, const kb_share_limits *lim)
{
    for (int32_t i = 0; i < window(sp); i++)
        if (sp->rec[i].state == KB_SR_AVAILABLE)
            return sp->start + i;
    if (window(sp) >= lim->max_locks || window(sp) >= KB_SHARE_PART_MAX_WINDOW)
        return -1;
    return sp->end;
}

/* Moves start up to log_start: what retention removed is archived. */
static void skip_to(kb_share_part *sp, int64_t log_start)
{
    if (log_start <= sp->start)
        return;
    if (log_start >= sp->end) {
        sp->start = sp->end = log_start;
        sp->persist.start_moved = true;
        return;
    }
    for (int64_t o = sp->start; o < log_start; o++)
        sp->rec[o - sp->start].state = KB_SR_ARCHIVED;
    advance_start(sp);
}

static void take(kb_share_rec *r, uint64_t owner, const kb_share_limits *lim, int64_t now)
{
    r->state = KB_SR_ACQUIRED;
    r->delivery_count++;
    r->owner = owner;
    r->lock_deadline = now + lim->lock_ms;
}

/* Appends offset o (delivery count dc) to the ranges. */
static int32_t add_range(kb_share_range *out, int32_t n, int32_t max_out, int64_t o, int16_t dc)
{
    if (n > 0 && out[n - 1].last == o - 1 && out[n - 1].delivery_count == dc) {
        out[n - 1].last = o;
        return n;
    }
    if (n >= max_out)
        return -1;
    out[n] = (kb_share_range){o, o, dc};
    return n + 1;
}

static bool extend(kb_share_part *sp, int64_t upto, int32_t cap_window)
{
    int64_t want = upto + 1 - sp->start;
    if (want > cap_window)
        want = cap_window;
    if (want <= window(sp))
        return false;
    if (want > sp->cap) {
        kb_share_rec *r = realloc(sp->rec, (size_t)want * sizeof(*r));
        if (r == NULL)
            return false;
        sp->rec = r;
        sp->cap = (int32_t)want;
    }
    for (int64_t i = window(sp); i < want; i++)
        sp->rec[i] = (kb_share_rec){KB_SR_AVAILABLE, 0, 0, KB_SHARE_NO_DEADLINE};
    sp->end = sp->start + want;
    return true;
}

int32_t kb_share_part_acquire(kb_share_part *sp, kp_str member, int64_t log_start, int64_t upto,
                              int32_t max_records, const kb_share_limits *lim, int64_t now,
                              kb_share_range *out, int32_t max_out)
{
    skip_to(sp, log_start);
    int32_t cap_window = lim->max_locks < KB_SHARE_PART_MAX_WINDOW ? lim->max_locks
                                                                   : KB_SHARE_PART_MAX_WINDOW;
    int32_t locks_left = lim->max_locks - acquired_count(sp);
    if (max_records > locks_left)
        max_records = locks_left;
    (void)extend(sp, upto, cap_window);
    uint64_t owner = kb_share_member_key(member);
    int32_t n = 0, got = 0;
    for (int32_t i = 0; i < window(sp) && got < max_records; i++) {
        int64_t o = sp->start + i;
        if (o > upto || sp->rec[i].state != KB_SR_AVAILABLE)
            continue;
        int32_t m = add_range(out, n, max_out, o, (int16_t)(sp->rec[i].delivery_count + 1));
        if (m < 0)
            break;
        n = m;
        take(&sp->rec[i], owner, lim, now);
        got++;
    }
    return n;
}

/* ---- acknowledgements ---------------------------------------------------- */

kp_err kb_share_part_check_ack(const kb_share_part *sp, kp_str member, int64_t first, int64_t last,
                               const int8_t *types, int32_t ntypes, bool renew_ok)
{
    /* the span in unsigned arithmetic: first and last come from the wire */
    uint64_t span = (uint64_t)last - (uint64_t)first + 1u;
    if (first > last || ntypes <= 0 || (ntypes != 1 && (uint64_t)ntypes != span))
        return KP_ERR_INVALID_REQUEST;
    for (int32_t i = 0; i < ntypes; i++)
        if (types[i] < KB_ACK_GAP || types[i] > KB_ACK_RENEW ||
            (types[i] == KB_ACK_RENEW && !renew_ok))
            return KP_ERR_INVALID_REQUEST;
    if (first < sp->start || last >= sp->end)
        return KP_ERR_INVALID_RECORD_STATE;
    uint64_t owner = kb_share_member_key(member);
    for (int64_t o = first; o <= last; o++) {
        const kb_share_rec *r = &sp->rec[o - sp->start];
        if (r->state != KB_SR_ACQUIRED || r->owner != owner)
            return KP_ERR_INVALID_RECORD_STATE;
    }
    return KP_ERR_NONE;
}

/* A record given back: AVAILABLE again, or ARCHIVED at the delivery limit. */
static void give_back(kb_share_rec *r, const kb_share_limits *lim)
{
    r->state = r->delivery_count >= lim->delivery_limit ? KB_SR_ARCHIVED : KB_SR_AVAILABLE;
    r->owner = 0;
    r->lock_deadline = KB_SHARE_NO_DEADLINE;
}

void kb_share_part_ack(kb_share_part *sp, int64_t first, int64_t last, const int8_t *types,
                       int32_t ntypes, const kb_share_limits *lim, int64_t now)
{
    for (int64_t o = first; o <= last; o++) {
        kb_share_rec *r = &sp->rec[o - sp->start];
        int8_t t = ntypes == 1 ? types[0] : types[o - first];
        if (t != KB_ACK_RENEW)
            touch(sp, o);
        if (t == KB_ACK_RELEASE) {
            give_back(r, lim);
        } else if (t == KB_ACK_RENEW) {
            r->lock_deadline = now + lim->lock_ms;
        } else {
            r->state = t == KB_ACK_ACCEPT ? KB_SR_ACKNOWLEDGED : KB_SR_ARCHIVED;
            r->owner = 0;
            r->lock_deadline = KB_SHARE_NO_DEADLINE;
        }
    }
    advance_start(sp);
}

void kb_share_parts_release(kb_share_parts *ps, uint64_t owner, const kb_share_limits *lim,
                            int64_t now)
{
    for (int32_t p = 0; ps != NULL && p < ps->n; p++) {
        kb_share_part *sp = ps->v[p];
        for (int32_t i = 0; i < window(sp); i++) {
            kb_share_rec *r = &sp->rec[i];
            if (r->state == KB_SR_ACQUIRED &&
                (owner != 0 ? r->owner == owner : r->lock_deadline <= now)) {
                give_back(r, lim);
                touch(sp, sp->start + i);
            }
        }
        advance_start(sp);
    }
}

int64_t kb_share_parts_next_deadline(const kb_share_parts *ps)
{
    int64_t d = KB_SHARE_NO_DEADLINE;
    for (int32_t p = 0; ps != NULL && p < ps->n; p++)
        for (int32_t i = 0; i < window(ps->v[p]); i++)
            if (ps->v[p]->rec[i].lock_deadline < d)
                d = ps->v[p]->rec[i].lock_deadline;
    return d;
}

/* ---- persistence ---------------------------------------------------------- */

bool kb_share_part_dirty(const kb_share_part *sp)
{
    const kb_share_persist *p = &sp->persist;
    return p->snapshot_due || p->start_moved || p->dirty_first <= p->dirty_last;
}

bool kb_share_parts_dirty(const kb_share_parts *ps)
{
    for (int32_t i = 0; ps != NULL && i < ps->n; i++)
        if (kb_share_part_dirty(ps->v[i]))
            return true;
    return false;
}

void kb_share_parts_drop(kb_share_parts *ps, kb_share_part *sp)
{
    for (int32_t i = 0; i < ps->n; i++) {
        if (ps->v[i] != sp)
            continue;
        for (int32_t j = 0; j < ps->nsessions; j++)
            session_forget_part(ps->sessions[j], sp);
        ps->v[i] = ps->v[--ps->n];
        free(sp->rec);
        free(sp);
        return;
    }
}

int32_t kb_share_part_batches(const kb_share_part *sp, int64_t first, int64_t last,
                              kb_share_state_batch *out, int32_t max)
{
    int64_t lo = first > sp->start ? first : sp->start;
    int64_t hi = last < sp->end - 1 ? last : sp->end - 1;
    int32_t n = 0;
    for (int64_t o = lo; o <= hi; o++) {
        const kb_share_rec *r = &sp->rec[o - sp->start];
        int8_t st = (int8_t)r->state;
        int16_t dc = r->delivery_count;
        if (st == KB_SR_ACQUIRED) { /* not persisted as acquired */
            st = KB_SR_AVAILABLE;
            dc = dc > 0 ? (int16_t)(dc - 1) : 0;
        }
        if (st == KB_SR_AVAILABLE && dc == 0)
            continue;
        if (n > 0 && out[n - 1].last == o - 1 && out[n - 1].state == st &&
            out[n - 1].delivery_count == dc) {
            out[n - 1].last = o;
            continue;
        }
        if (n >= max)
            return -1;
        out[n++] = (kb_share_state_batch){o, o, st, dc};
    }
    return n;
}

int32_t kb_share_part_done_count(const kb_share_part *sp)
{
    int32_t n = 0;
    for (int32_t i = 0; i < window(sp); i++)
        n += done(&sp->rec[i]);
    return n;
}

static bool batch_ok(const kb_share_state_batch *b)
{
    return b->first >= 0 && b->first <= b->last && b->delivery_count >= 0 &&
           (b->state == KB_SR_AVAILABLE || b->state == KB_SR_ACKNOWLEDGED ||
            b->state == KB_SR_ARCHIVED);
}

kp_err kb_share_part_restore(kb_share_part *sp, bool snapshot, int64_t start,
                             const kb_share_state_batch *b, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        if (!batch_ok(&b[i]))
            return KP_ERR__CORRUPT;
    if (start > INT64_MAX - KB_SHARE_PART_MAX_WINDOW) /* the window must fit in an int64 */
        return KP_ERR__CORRUPT;
    if (snapshot || (start >= 0 && start < sp->start))
        sp->start = sp->end = start >= 0 ? start : sp->start;
    else if (start >= 0)
        skip_to(sp, start);
    for (int32_t i = 0; i < n; i++) {
        int64_t lo = b[i].first > sp->start ? b[i].first : sp->start;
        int64_t hi = b[i].last < sp->start + KB_SHARE_PART_MAX_WINDOW - 1
                         ? b[i].last
                         : sp->start + KB_SHARE_PART_MAX_WINDOW - 1;
        if (lo > hi)
            continue;
        (void)extend(sp, hi, KB_SHARE_PART_MAX_WINDOW);
        if (sp->end <= hi)
            return KP_ERR__NOMEM;
        for (int64_t o = lo; o <= hi; o++)
            sp->rec[o - sp->start] =
                (kb_share_rec){(uint8_t)b[i].state, b[i].delivery_count, 0, KB_SHARE_NO_DEADLINE};
    }
    advance_start(sp);
    return KP_ERR_NONE;
}

/* ---- sessions ------------------------------------------------------------ */

kb_share_session *kb_share_session_find(const kb_share_parts *ps, kp_str member_id)
{
    for (int32_t i = 0; ps != NULL && i < ps->nsessions; i++)
        if (kp_cstr_is(ps->sessions[i]->member_id, member_id))
            return ps->sessions[i];
    return NULL;
}

kp_err kb_share_session_open(kb_share_parts *ps, kp_str member_id, kb_share_session **out)
{
    kb_share_session *old = kb_share_session_find(ps, member_id);
    if (old != NULL)
        kb_share_session_close(ps, old);
    if (ps->nsessions >= KB_SHARE_SESSIONS_MAX)
        return KP_ERR_SHARE_SESSION_LIMIT_REACHED;
    if (!grow((void **)&ps->sessions, ps->nsessions, &ps->sessions_cap, sizeof(*ps->sessions)))
        return KP_ERR__NOMEM;
    kb_share_session *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->member_id = kp_str_cdup(member_id)) == NULL) {
        free(s);
        return KP_ERR__NOMEM;
    }
    s->epoch = 1;
    ps->sessions[ps->nsessions++] = s;
    *out = s;
    return KP_ERR_NONE;
}

void kb_share_session_close(kb_share_parts *ps, kb_share_session *s)
{
    for (int32_t i = 0; i < ps->nsessions; i++)
        if (ps->sessions[i] == s) {
            ps->sessions[i] = ps->sessions[--ps->nsessions];
            break;
        }
    session_free(s);
}

kp_err kb_share_session_add(kb_share_session *s, kb_share_part *sp)
{
    for (int32_t i = 0; i < s->nparts; i++)
        if (s->parts[i] == sp)
            return KP_ERR_NONE;
    if (s->nparts >= KB_SHARE_SESSION_PARTS)
        return KP_ERR_INVALID_REQUEST;
    if (!grow((void **)&s->parts, s->nparts, &s->cap, sizeof(*s->parts)))
        return KP_ERR__NOMEM;
    s->parts[s->nparts++] = sp;
    return KP_ERR_NONE;
}

void kb_share_session_forget(kb_share_session *s, const kp_uuid *topic, int32_t part)
{
    for (int32_t i = 0; i < s->nparts; i++)
        if (s->parts[i]->partition == part &&
            memcmp(&s->parts[i]->topic, topic, sizeof(*topic)) == 0) {
            s->parts[i] = s->parts[--s->nparts];
            return;
        }
}

size_t kb_share_session_count(const kb_share_parts *ps)
{
    return ps != NULL ? (size_t)ps->nsessions : 0;
}

kb_share_session *kb_share_session_at(const kb_share_parts *ps, size_t i)
{
    return ps != NULL && i < (size_t)ps->nsessions ? ps->sessions[i] : NULL;
}
