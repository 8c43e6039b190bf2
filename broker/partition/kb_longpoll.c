#include "kb_longpoll.h"

#include <stdlib.h>
#include <string.h>

#include "kb_map.h"
#include "kb_partition_log.h"

typedef struct poll_list poll_list;

typedef struct kb_poll_watch {
    struct kb_poll_watch *next, *prev;
    poll_list *list;
    kb_poll_waiter *waiter; /* NULL once dead (invariant 2) */
} kb_poll_watch;

struct poll_list {
    kp_uuid topic_id;
    int32_t partition;
    int32_t live;    /* watches with a waiter */
    int32_t walking; /* appends walking the list now */
    kb_poll_watch *head;
};

struct kb_longpoll {
    kb_map lists; /* poll_list *, by (topic id, partition) */
};

typedef struct list_key {
    const kp_uuid *topic_id;
    int32_t partition;
} list_key;

static uint64_t key_hash(const kp_uuid *id, int32_t partition)
{
    return kb_map_hash_more(kb_map_hash_bytes(id->b, sizeof(id->b)), &partition,
                            sizeof(partition));
}

static bool list_is(const void *entry, const void *key)
{
    const poll_list *l = entry;
    const list_key *k = key;
    return l->partition == k->partition && memcmp(l->topic_id.b, k->topic_id->b, sizeof(l->topic_id.b)) == 0;
}

static poll_list *list_find(const struct kb_longpoll *lp, const kp_uuid *id, int32_t partition)
{
    list_key k = {id, partition};
    return kb_map_find(&lp->lists, key_hash(id, partition), &k, list_is);
}

static poll_list *list_get(struct kb_longpoll *lp, const kp_uuid *id, int32_t partition)
{
    poll_list *l = list_find(lp, id, partition);
    if (l != NULL)
        return l;
    l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->topic_id = *id;
    l->partition = partition;
    if (kb_map_insert(&lp->lists, key_hash(id, partition), l) != KP_ERR_NONE) {
        free(l);
        return NULL;
    }
    return l;
}

static void list_drop_if_empty(struct kb_longpoll *lp, poll_list *l)
{
    if (l->head != NULL || l->walking > 0)
        return;
    kb_map_remove_entry(&lp->lists, key_hash(&l->topic_id, l->partition), l);
    free(l);
}

static void watch_unlink(kb_poll_watch *w)
{
    poll_list *l = w->list;
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        l->head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    free(w);
}

void kb_longpoll_unpark(kb_longpoll *lp, kb_poll_waiter *w)
{
    for (int32_t i = 0; i < w->nwatches; i++) {
        kb_poll_watch *watch = w->watches[i];
        poll_list *l = watch->list;
        l->live--;
        if (l->walking > 0) {
            watch->waiter = NULL; /* the walk frees it */
            continue;
        }
        watch_unlink(watch);
        list_drop_if_empty(lp, l);
    }
    free(w->watches);
    w->watches = NULL;
    w->nwatches = 0;
}

kp_err kb_longpoll_park(kb_longpoll *lp, kb_poll_waiter *w, kb_topic *const *topics,
                        const int32_t *partitions, int32_t n)
{
    w->watches = calloc((size_t)(n > 0 ? n : 1), sizeof(*w->watches));
    w->nwatches = 0;
    if (w->watches == NULL)
        return KP_ERR__NOMEM;
    for (int32_t i = 0; i < n; i++) {
        poll_list *l = list_get(lp, &topics[i]->id, partitions[i]);
        kb_poll_watch *watch = l != NULL ? calloc(1, sizeof(*watch)) : NULL;
        if (watch == NULL) {
            if (l != NULL)
                list_drop_if_empty(lp, l);
            kb_longpoll_unpark(lp, w);
            return KP_ERR__NOMEM;
        }
        *watch = (kb_poll_watch){.next = l->head, .list = l, .waiter = w};
        if (l->head != NULL)
            l->head->prev = watch;
        l->head = watch;
        l->live++;
        w->watches[w->nwatches++] = watch;
    }
    return KP_ERR_NONE;
}

void kb_longpoll_appended(kb_longpoll *lp, const kb_topic *t, int32_t partition)
{
    poll_list *l = list_find(lp, &t->id, partition);
    if (l == NULL)
        return;
    l->walking++;
    for (kb_poll_watch *w = l->head; w != NULL; w = w->next)
        if (w->waiter != NULL)
            w->waiter->wake(w->waiter);
    l->walking--;
    if (l->walking > 0)
        return;
    for (kb_poll_watch *w = l->head, *next; w != NULL; w = next) {
        next = w->next;
        if (w->waiter == NULL)
            watch_unlink(w);
    }
    list_drop_if_empty(lp, l);
}

int32_t kb_longpoll_waiting(const kb_longpoll *lp, const kb_topic *t, int32_t partition)
{
    const poll_list *l = list_find(lp, &t->id, partition);
    return l != NULL ? l->live : 0;
}

kb_longpoll *kb_longpoll_new(void)
{
    return calloc(1, sizeof(kb_longpoll));
}

void kb_longpoll_free(kb_longpoll *lp)
{
    if (lp == NULL)
        return;
    size_t cursor = 0;
    for (poll_list *l; (l = kb_map_next(&lp->lists, &cursor)) != NULL;) {
        while (l->head != NULL) {
            kb_poll_watch *w = l->head;
            l->head = w->next;
            free(w);
        }
        free(l);
    }
    kb_map_fini(&lp->lists);
    free(lp);
}

static void on_append(void *arg, kb_topic *t, int32_t partition)
{
    kb_longpoll_appended(arg, t, partition);
}

kp_err kb_longpoll_start(kb_broker *b)
{
    b->longpoll = kb_longpoll_new();
    if (b->longpoll == NULL)
        return KP_ERR__NOMEM;
    kb_partition_log_set_append_hook(b, on_append, b->longpoll);
    return KP_ERR_NONE;
}

void kb_longpoll_stop(kb_broker *b)
{
    kb_longpoll_free(b->longpoll);
    b->longpoll = NULL;
}
