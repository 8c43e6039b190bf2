#include "kb_features.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kb_file.h"

#define FEATURES_FILE "runnel-features.properties"
#define METADATA_VERSION "metadata.version"
#define KRAFT_VERSION "kraft.version"

/* Kafka 4.4.0's ranges, and the levels its storage tool finalizes for a new
 * cluster, but kraft.version, which a node without a Raft quorum of its own
 * leaves at 0 (as Kafka's static controller.quorum.voters does). */
static const kb_feature_range ranges[] = {
    {METADATA_VERSION, 7, 33, 33}, /* 3.3-IV3 .. 4.4-IV2 */
    {KRAFT_VERSION, 0, 1, 0},
    {"group.version", 0, 1, 1},
    {"transaction.version", 0, 2, 2},
    {"share.version", 0, 2, 2},
    {"streams.version", 0, 1, 1},
    {"eligible.leader.replicas.version", 0, 1, 1},
};
#define NRANGES ((int)(sizeof(ranges) / sizeof(ranges[0])))

struct kb_features {
    char *dir;
    int64_t epoch;
    int16_t level[NRANGES];
};

const kb_feature_range *kb_feature_at(int i)
{
    return i >= 0 && i < NRANGES ? &ranges[i] : NULL;
}

static int find(kp_str name)
{
    for (int i = 0; i < NRANGES; i++)
        if (kp_str_eq_c(name, ranges[i].name))
            return i;
    return -1;
}

int16_t kb_features_level(const kb_features *f, const char *name)
{
    int i = find(kp_str_from(name));
    return i < 0 ? 0 : f->level[i];
}

int64_t kb_features_epoch(const kb_features *f)
{
    return f->epoch;
}

/* ---- the file ------------------------------------------------------------ */

static kp_err load_line(void *arg, char *line)
{
    kb_features *f = arg;
    char *eq = strchr(line, '=');
    if (line[0] == '#' || line[0] == '\0')
        return KP_ERR_NONE;
    if (eq == NULL)
        return KP_ERR__CORRUPT;
    *eq = '\0';
    char *end;
    long long v = strtoll(eq + 1, &end, 10);
    if (end == eq + 1 || *end != '\0')
        return KP_ERR__CORRUPT;
    if (strcmp(line, "epoch") == 0) {
        f->epoch = v;
        return KP_ERR_NONE;
    }
    int i = find(kp_str_from(line));
    if (i < 0)
        return KP_ERR_NONE; /* a feature this build no longer knows */
    if (v < ranges[i].min || v > ranges[i].max)
        return KP_ERR__CORRUPT; /* finalized beyond what this build supports */
    f->level[i] = (int16_t)v;
    return KP_ERR_NONE;
}

static void emit(void *arg, FILE *out)
{
    const kb_features *f = arg;
    fprintf(out, "# runnel finalized feature levels, version 1\nepoch=%lld\n",
            (long long)f->epoch);
    for (int i = 0; i < NRANGES; i++)
        fprintf(out, "%s=%d\n", ranges[i].name, f->level[i]);
}

kp_err kb_features_open(const char *dir, kb_features **out)
{
    kb_features *f = calloc(1, sizeof(*f));
    if (f == NULL || (f->dir = strdup(dir)) == NULL) {
        free(f);
        return KP_ERR__NOMEM;
    }
    f->epoch = 1;
    for (int i = 0; i < NRANGES; i++)
        f->level[i] = ranges[i].initial;
    kp_err e = kb_file_read_lines(f->dir, FEATURES_FILE, load_line, f);
    if (e != KP_ERR_NONE) {
        kb_features_close(f);
        return e;
    }
    *out = f;
    return KP_ERR_NONE;
}

void kb_features_close(kb_features *f)
{
    if (f == NULL)
        return;
    free(f->dir);
    free(f);
}

/* ---- UpdateFeatures -------------------------------------------------------- */

/* Why Kafka's controller refuses u, or NULL; the order of the checks is
 * Kafka's, so a request with several faults gets the same text. */
static const char *refusal(const kb_features *f, const kb_feature_update *u, int32_t node_id,
                           char *buf, size_t cap)
{
    if (u->type < KB_FEATURE_UPGRADE || u->type > KB_FEATURE_UNSAFE_DOWNGRADE)
        return "The controller does not support the given upgrade type.";
    if (u->level < 0)
        return "A feature version cannot be less than 0.";
    int i = find(u->name);
    if (i < 0) {
        snprintf(buf, cap, "Local controller %d does not support this feature.", node_id);
        return buf;
    }
    if (u->level < ranges[i].min || u->level > ranges[i].max) {
        snprintf(buf, cap, "Local controller %d only supports versions %d-%d", node_id,
                 ranges[i].min, ranges[i].max);
        return buf;
    }
    int16_t cur = f->level[i];
    if (u->level < cur && u->type == KB_FEATURE_UPGRADE)
        return "Can't downgrade the version of this feature without setting the upgrade type "
               "to either safe or unsafe downgrade.";
    if (u->level > cur && u->type != KB_FEATURE_UPGRADE)
        return "Can't downgrade to a newer version.";
    if (u->level < cur && strcmp(ranges[i].name, KRAFT_VERSION) == 0)
        return "Can't downgrade the version of this feature.";
    return NULL;
}

/* metadata.version is never lowered: Runnel, like Kafka 4.4, cannot tell
 * which metadata a lower level would lose. */
static bool metadata_refusal(const kb_features *f, const kb_feature_update *u, kb_msgbuf *msg)
{
    int i = find(u->name);
    if (i < 0 || strcmp(ranges[i].name, METADATA_VERSION) != 0 || u->level >= f->level[i])
        return false;
    kb_msgf(msg,
            "The update failed for all features since the following feature had an error: "
            "Unsupported metadata.version downgrade from %d to %d. %s",
            f->level[i], u->level,
            u->type == KB_FEATURE_UNSAFE_DOWNGRADE
                ? "Unsafe metadata downgrade is not supported in this version."
                : "Refusing to perform the requested downgrade because it might delete "
                  "metadata information.");
    return true;
}

kp_err kb_features_update(kb_features *f, const kb_feature_update *u, int32_t n,
                          bool validate_only, int32_t node_id, kb_msgbuf *msg)
{
    for (int32_t k = 0; k < n; k++) {
        char buf[96];
        const char *why = refusal(f, &u[k], node_id, buf, sizeof buf);
        if (why != NULL) {
            kb_msgf(msg,
                    "The update failed for all features since the following feature had an "
                    "error: Invalid update version %d for feature %.*s. %s",
                    u[k].level, u[k].name.len > 0 ? (int)u[k].name.len : 0,
                    u[k].name.len > 0 ? u[k].name.p : "", why);
            return KP_ERR_INVALID_UPDATE_VERSION;
        }
        if (metadata_refusal(f, &u[k], msg))
            return KP_ERR_INVALID_UPDATE_VERSION;
    }
    if (validate_only || n == 0)
        return KP_ERR_NONE;
    kb_features next = *f;
    for (int32_t k = 0; k < n; k++)
        next.level[find(u[k].name)] = u[k].level;
    next.epoch++;
    kp_err e = kb_file_write_stream(f->dir, FEATURES_FILE, emit, &next);
    if (e != KP_ERR_NONE)
        return e == KP_ERR__NOMEM ? e : KP_ERR_KAFKA_STORAGE_ERROR;
    *f = next;
    return KP_ERR_NONE;
}
