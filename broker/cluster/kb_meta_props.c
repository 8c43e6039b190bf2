#include "kb_meta_props.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kb_file.h"
#include "kb_uuid.h"

#define META_FILE "meta.properties"

static const char *value_of(const char *line, const char *key)
{
    size_t n = strlen(key);
    return strncmp(line, key, n) == 0 && line[n] == '=' ? line + n + 1 : NULL;
}

static int32_t int_value(const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    return end != v && *end == '\0' && x >= -1 && x <= INT32_MAX ? (int32_t)x : -2;
}

static void parse_line(kb_meta_props *p, char *line)
{
    line[strcspn(line, "\r\n")] = '\0';
    const char *v;
    if ((v = value_of(line, "cluster.id")) != NULL)
        snprintf(p->cluster_id, sizeof(p->cluster_id), "%.63s", v);
    else if ((v = value_of(line, "node.id")) != NULL)
        p->node_id = int_value(v);
    else if ((v = value_of(line, "version")) != NULL)
        p->version = int_value(v);
    else if ((v = value_of(line, "directory.id")) != NULL && !kb_uuid_parse(v, &p->directory_id))
        memset(&p->directory_id, 0xff, sizeof(p->directory_id)); /* caught by the check */
}

kp_err kb_meta_props_read(const char *dir, kb_meta_props *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->node_id = -1;
    out->version = -1;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, META_FILE);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        snprintf(err, errlen, "No `meta.properties` found in %s (have you run `runnel format` "
                 "or `kafka-storage format` to format the directory?)", dir);
        return errno == ENOENT ? KP_ERR__NOENT : KP_ERR__IO;
    }
    char line[512];
    while (fgets(line, sizeof(line), f) != NULL)
        if (line[0] != '#')
            parse_line(out, line);
    fclose(f);
    return KP_ERR_NONE;
}

kp_err kb_meta_props_write(const char *dir, const kb_meta_props *p, char *err, size_t errlen)
{
    char did[23], body[512];
    kb_uuid_format(&p->directory_id, did);
    int len = snprintf(body, sizeof(body),
                       "#\n#Written by runnel format\nnode.id=%d\ndirectory.id=%s\nversion=1\n"
                       "cluster.id=%s\n", p->node_id, did, p->cluster_id);
    if (kb_file_write_atomic(dir, META_FILE, body, (size_t)len) != KP_ERR_NONE) {
        snprintf(err, errlen, "cannot write %s/%s: %s", dir, META_FILE, strerror(errno));
        return KP_ERR__IO;
    }
    return KP_ERR_NONE;
}

size_t kb_meta_props_dirs(const kb_config *cfg, const char **out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < cfg->log_dirs.n && n < max; i++)
        out[n++] = cfg->log_dirs.v[i];
    const char *m = cfg->metadata_log_dir;
    bool seen = m == NULL;
    for (size_t i = 0; i < n && !seen; i++)
        seen = strcmp(out[i], m) == 0;
    if (!seen && n < max)
        out[n++] = m;
    return n;
}

/* One dir against what the first one (or cluster.id) fixed. */
static kp_err check_one(const kb_config *cfg, const char *dir, const kb_meta_props *p,
                        kb_meta_props *cluster, char *err, size_t errlen)
{
    static const kp_uuid bad = {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
    if (p->version != 1) {
        snprintf(err, errlen, "%s/%s: version=%d, expected 1 (a KRaft log dir)", dir, META_FILE,
                 p->version);
        return KP_ERR__INVAL;
    }
    if (p->cluster_id[0] == '\0' || memcmp(&p->directory_id, &bad, sizeof(bad)) == 0) {
        snprintf(err, errlen, "%s/%s: no cluster.id or a bad directory.id", dir, META_FILE);
        return KP_ERR__INVAL;
    }
    if (cluster->cluster_id[0] != '\0' && strcmp(cluster->cluster_id, p->cluster_id) != 0) {
        snprintf(err, errlen, "Invalid cluster.id in: %s/%s. Expected %s, but read %s", dir,
                 META_FILE, cluster->cluster_id, p->cluster_id);
        return KP_ERR__INVAL;
    }
    if (p->node_id != cfg->node_id) {
        snprintf(err, errlen, "Stored node id %d in %s/%s doesn't match the node.id %d in the "
                 "configuration", p->node_id, dir, META_FILE, cfg->node_id);
        return KP_ERR__INVAL;
    }
    snprintf(cluster->cluster_id, sizeof(cluster->cluster_id), "%s", p->cluster_id);
    return KP_ERR_NONE;
}

kp_err kb_meta_props_check_all(const kb_config *cfg, kb_meta_props *cluster, kp_uuid *dir_ids,
                               size_t max, char *err, size_t errlen)
{
    const char *dirs[64];
    size_t n = kb_meta_props_dirs(cfg, dirs, max < 64 ? max : 64);
    memset(cluster, 0, sizeof(*cluster));
    if (cfg->cluster_id != NULL)
        snprintf(cluster->cluster_id, sizeof(cluster->cluster_id), "%.63s", cfg->cluster_id);
    for (size_t i = 0; i < n; i++) {
        kb_meta_props p;
        kp_err e = kb_meta_props_read(dirs[i], &p, err, errlen);
        if (e == KP_ERR_NONE)
            e = check_one(cfg, dirs[i], &p, cluster, err, errlen);
        if (e != KP_ERR_NONE)
            return e;
        dir_ids[i] = p.directory_id;
    }
    cluster->node_id = cfg->node_id;
    cluster->version = 1;
    return KP_ERR_NONE;
}

static kp_err format_one(const char *dir, const kb_meta_props *want, char *err, size_t errlen)
{
    kb_meta_props have;
    if (kb_meta_props_read(dir, &have, err, errlen) == KP_ERR_NONE) {
        if (strcmp(have.cluster_id, want->cluster_id) == 0)
            return KP_ERR_NONE; /* formatted already for this cluster */
        snprintf(err, errlen, "Log directory %s is already formatted with cluster.id %s, not %s",
                 dir, have.cluster_id, want->cluster_id);
        return KP_ERR__INVAL;
    }
    if (kb_file_mkdirs(dir) != 0) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return KP_ERR__IO;
    }
    kb_meta_props p = *want;
    kb_uuid_random(&p.directory_id);
    return kb_meta_props_write(dir, &p, err, errlen);
}

kp_err kb_meta_props_format(const kb_config *cfg, const char *cluster_id, char *err,
                            size_t errlen)
{
    kp_uuid check;
    if (!kb_uuid_parse(cluster_id, &check)) {
        snprintf(err, errlen, "Cluster ID string %s does not appear to be a valid UUID", cluster_id);
        return KP_ERR__INVAL;
    }
    kb_meta_props want = {.node_id = cfg->node_id, .version = 1};
    snprintf(want.cluster_id, sizeof(want.cluster_id), "%s", cluster_id);
    const char *dirs[64];
    size_t n = kb_meta_props_dirs(cfg, dirs, 64);
    for (size_t i = 0; i < n; i++) {
        kp_err e = format_one(dirs[i], &want, err, errlen);
        if (e != KP_ERR_NONE)
            return e;
    }
    return KP_ERR_NONE;
}
