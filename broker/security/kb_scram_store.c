#include "kb_scram_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#define STORE_FILE_MAX (64u * 1024 * 1024)
#define B64_LEN(n) (4 * (((n) + 2) / 3))
/* An empty salt in the file (base64 of nothing is an empty field). */
#define EMPTY_SALT "-"
#define STORE_LINE_MAX                                                                  \
    (16 + 16 + B64_LEN(KB_SCRAM_USER_MAX) + 12 + B64_LEN(KB_SCRAM_SALT_MAX) +           \
     2 * B64_LEN(KB_SCRAM_HASH_MAX) + 8)

typedef struct store_entry {
    char *se_user;
    size_t se_user_len;
    kb_scram_cred se_cred;
} store_entry;

struct kb_scram_store {
    char *path; /* NULL: memory only */
    store_entry *v;
    size_t n;
    size_t cap;
};

static int entry_cmp(const char *u, size_t ulen, kb_scram_mech m, const store_entry *e)
{
    size_t min = ulen < e->se_user_len ? ulen : e->se_user_len;
    int c = memcmp(u, e->se_user, min);
    if (c != 0)
        return c;
    if (ulen != e->se_user_len)
        return ulen < e->se_user_len ? -1 : 1;
    return (int)m - (int)e->se_cred.sc_mech;
}

/* The index of (user, m), or where it would go; *found says which. */
static size_t store_search(const kb_scram_store *st, const char *u, size_t ulen, kb_scram_mech m,
                           bool *found)
{
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = entry_cmp(u, ulen, m, &st->v[mid]);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

const kb_scram_cred *kb_scram_store_find(const kb_scram_store *st, const char *user, size_t ulen,
                                         kb_scram_mech m)
{
    bool found;
    if (st == NULL)
        return NULL;
    size_t i = store_search(st, user, ulen, m, &found);
    return found ? &st->v[i].se_cred : NULL;
}

kp_err kb_scram_store_put(kb_scram_store *st, const char *user, size_t ulen,
                          const kb_scram_cred *cred)
{
    bool found;
    size_t i = store_search(st, user, ulen, cred->sc_mech, &found);
    if (found) {
        st->v[i].se_cred = *cred;
        return KP_ERR_NONE;
    }
    if (st->n >= KB_SCRAM_STORE_MAX || ulen == 0 || ulen > KB_SCRAM_USER_MAX)
        return KP_ERR__INVAL;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 16;
        store_entry *v = realloc(st->v, cap * sizeof(*v));
        if (v == NULL)
            return KP_ERR__NOMEM;
        st->v = v;
        st->cap = cap;
    }
    char *name = malloc(ulen + 1);
    if (name == NULL)
        return KP_ERR__NOMEM;
    memcpy(name, user, ulen);
    name[ulen] = '\0';
    memmove(&st->v[i + 1], &st->v[i], (st->n - i) * sizeof(st->v[0]));
    st->v[i] = (store_entry){name, ulen, *cred};
    st->n++;
    return KP_ERR_NONE;
}

kp_err kb_scram_store_delete(kb_scram_store *st, const char *user, size_t ulen, kb_scram_mech m)
{
    bool found;
    size_t i = store_search(st, user, ulen, m, &found);
    if (!found)
        return KP_ERR_RESOURCE_NOT_FOUND;
    free(st->v[i].se_user);
    OPENSSL_cleanse(&st->v[i].se_cred, sizeof st->v[i].se_cred);
    memmove(&st->v[i], &st->v[i + 1], (st->n - i - 1) * sizeof(st->v[0]));
    st->n--;
    return KP_ERR_NONE;
}

size_t kb_scram_store_count(const kb_scram_store *st)
{
    return st->n;
}

const kb_scram_cred *kb_scram_store_at(const kb_scram_store *st, size_t i, const char **user)
{
    *user = st->v[i].se_user;
    return &st->v[i].se_cred;
}

void kb_scram_store_free(kb_scram_store *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->n; i++)
        free(st->v[i].se_user);
    OPENSSL_cleanse(st->v, st->cap * sizeof(st->v[0]));
    free(st->v);
    free(st->path);
    free(st);
}

/* ---- the file --------------------------------------------------------------- */

static kb_scram_mech mech_from_name(const char *s)
{
    if (strcmp(s, "SCRAM-SHA-256") == 0)
        return KB_SCRAM_SHA_256;
    if (strcmp(s, "SCRAM-SHA-512") == 0)
        return KB_SCRAM_SHA_512;
    return KB_SCRAM_UNKNOWN;
}

/* Decodes one base64 field into out (exactly want bytes unless want == 0,
 * then 1..cap); false if malformed. */
static bool field_b64(const char *f, uint8_t *out, size_t cap, size_t want, size_t *got)
{
    uint8_t tmp[B64_LEN(KB_SCRAM_USER_MAX)];
    size_t n = strlen(f);
    if (n > sizeof tmp || !kb_b64_decode(f, n, tmp, sizeof tmp, got))
        return false;
    if ((want != 0 && *got != want) || *got == 0 || *got > cap)
        return false;
    memcpy(out, tmp, *got);
    return true;
}

/* Parses one line: "v1 mech user iterations salt stored server". */
static bool parse_line(char *line, char *user, size_t *ulen, kb_scram_cred *c)
{
    char *f[7], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " \n", &save); t != NULL && n < 7; t = strtok_r(NULL, " \n", &save))
        f[n++] = t;
    if (n != 7 || strtok_r(NULL, " \n", &save) != NULL || strcmp(f[0], "v1") != 0)
        return false;
    memset(c, 0, sizeof(*c));
    c->sc_mech = mech_from_name(f[1]);
    size_t hlen = kb_scram_hash_len(c->sc_mech);
    char *end = NULL;
    long it = strtol(f[3], &end, 10);
    size_t k1 = 0, k2 = 0;
    if (hlen == 0 || *end != '\0' || it < KB_SCRAM_MIN_ITERATIONS || it > KB_SCRAM_MAX_ITERATIONS)
        return false;
    c->sc_iterations = (int32_t)it;
    return field_b64(f[2], (uint8_t *)user, KB_SCRAM_USER_MAX, 0, ulen) &&
           memchr(user, '\0', *ulen) == NULL &&
           (strcmp(f[4], EMPTY_SALT) == 0 ||
            field_b64(f[4], c->sc_salt, KB_SCRAM_SALT_MAX, 0, &c->sc_salt_len)) &&
           field_b64(f[5], c->sc_stored_key, KB_SCRAM_HASH_MAX, hlen, &k1) &&
           field_b64(f[6], c->sc_server_key, KB_SCRAM_HASH_MAX, hlen, &k2);
}

static kp_err store_load(kb_scram_store *st, char *err, size_t errlen)
{
    FILE *f = fopen(st->path, "r");
    if (f == NULL) {
        if (errno == ENOENT)
            return KP_ERR_NONE;
        snprintf(err, errlen, "%s: cannot open: %s", st->path, strerror(errno));
        return KP_ERR__IO;
    }
    char line[STORE_LINE_MAX + 2];
    kp_err e = KP_ERR_NONE;
    for (size_t lineno = 1; e == KP_ERR_NONE && fgets(line, sizeof line, f) != NULL; lineno++) {
        char user[KB_SCRAM_USER_MAX + 1];
        size_t ulen = 0;
        kb_scram_cred c;
        if (strchr(line, '\n') == NULL || !parse_line(line, user, &ulen, &c)) {
            snprintf(err, errlen, "%s:%zu: malformed credential line", st->path, lineno);
            e = KP_ERR__CORRUPT;
        } else {
            e = kb_scram_store_put(st, user, ulen, &c);
            OPENSSL_cleanse(&c, sizeof c);
        }
    }
    if (e == KP_ERR_NONE && ferror(f)) {
        snprintf(err, errlen, "%s: read error", st->path);
        e = KP_ERR__IO;
    }
    fclose(f);
    return e;
}

kp_err kb_scram_store_open(const char *dir, kb_scram_store **out, char *err, size_t errlen)
{
    *out = NULL;
    kb_scram_store *st = calloc(1, sizeof(*st));
    if (st == NULL)
        return KP_ERR__NOMEM;
    if (dir != NULL) {
        size_t n = strlen(dir) + sizeof(KB_SCRAM_STORE_FILE) + 2;
        st->path = malloc(n);
        if (st->path == NULL) {
            free(st);
            return KP_ERR__NOMEM;
        }
        snprintf(st->path, n, "%s/%s", dir, KB_SCRAM_STORE_FILE);
        kp_err e = store_load(st, err, errlen);
        if (e != KP_ERR_NONE) {
            kb_scram_store_free(st);
            return e;
        }
    }
    *out = st;
    return KP_ERR_NONE;
}

static bool write_entry(FILE *f, const store_entry *e)
{
    char user[B64_LEN(KB_SCRAM_USER_MAX) + 1], salt[B64_LEN(KB_SCRAM_SALT_MAX) + 1];
    char sk[B64_LEN(KB_SCRAM_HASH_MAX) + 1], vk[B64_LEN(KB_SCRAM_HASH_MAX) + 1];
    size_t hlen = kb_scram_hash_len(e->se_cred.sc_mech);
    kb_b64_encode(user, sizeof user, (const uint8_t *)e->se_user, e->se_user_len);
    kb_b64_encode(salt, sizeof salt, e->se_cred.sc_salt, e->se_cred.sc_salt_len);
    kb_b64_encode(sk, sizeof sk, e->se_cred.sc_stored_key, hlen);
    kb_b64_encode(vk, sizeof vk, e->se_cred.sc_server_key, hlen);
    return fprintf(f, "v1 %s %s %d %s %s %s\n", kb_scram_mech_name(e->se_cred.sc_mech), user,
                   (int)e->se_cred.sc_iterations, e->se_cred.sc_salt_len == 0 ? EMPTY_SALT : salt,
                   sk, vk) > 0;
}

/* fsyncs the directory holding path, so a rename in it is durable. */
static bool sync_dir(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false;
    bool ok = fsync(fd) == 0;
    close(fd);
    return ok;
}

kp_err kb_scram_store_save(const kb_scram_store *st)
{
    if (st->path == NULL)
        return KP_ERR_NONE;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", st->path) >= (int)sizeof tmp)
        return KP_ERR__IO;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        if (fd >= 0)
            close(fd);
        return KP_ERR__IO;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < st->n; i++)
        ok = write_entry(f, &st->v[i]);
    ok = fflush(f) == 0 && ok && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, st->path) != 0 || !sync_dir(st->path)) {
        (void)unlink(tmp);
        return KP_ERR__IO;
    }
    return KP_ERR_NONE;
}
