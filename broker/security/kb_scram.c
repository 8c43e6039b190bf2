#include "kb_scram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "kb_scram_store.h"

#define SCRAM_NONCE_BYTES 18 /* 24 base64 characters of server nonce */
#define SCRAM_NONCE_MAX 64   /* a fixed (test) server nonce */

enum scram_state { S_CLIENT_FIRST = 0, S_CLIENT_FINAL, S_DONE, S_FAILED };

struct kb_scram {
    kb_scram_mech mech;
    const EVP_MD *md;
    size_t hlen;
    const kb_scram_store *store;
    enum scram_state state;
    kb_scram_cred cred;
    char user[KB_SCRAM_USER_MAX + 1];
    char fixed_nonce[SCRAM_NONCE_MAX + 1];
    char *gs2;          /* the gs2 header, e.g. "n,," */
    size_t gs2_len;
    char *bare;         /* client-first-message-bare */
    size_t bare_len;
    char *server_first;
    size_t server_first_len;
    size_t nonce_len;   /* the combined nonce is server_first + 2 */
    char *out;          /* the last token sent */
    const char *why;
};

/* A field of a comma-separated SCRAM message. */
typedef struct span {
    const char *p;
    size_t n;
    bool end; /* no field left */
} span;

/* ---- credentials ------------------------------------------------------------ */

static const EVP_MD *mech_md(kb_scram_mech m)
{
    return m == KB_SCRAM_SHA_256 ? EVP_sha256() : m == KB_SCRAM_SHA_512 ? EVP_sha512() : NULL;
}

const char *kb_scram_mech_name(kb_scram_mech m)
{
    return m == KB_SCRAM_SHA_256 ? "SCRAM-SHA-256"
           : m == KB_SCRAM_SHA_512 ? "SCRAM-SHA-512"
                                   : "UNKNOWN";
}

size_t kb_scram_hash_len(kb_scram_mech m)
{
    return m == KB_SCRAM_SHA_256 ? 32 : m == KB_SCRAM_SHA_512 ? 64 : 0;
}

static bool hmac(const EVP_MD *md, const uint8_t *key, size_t klen, const void *d, size_t n,
                 uint8_t *out)
{
    unsigned int len = 0;
    return HMAC(md, key, (int)klen, d, n, out, &len) != NULL;
}

kp_err kb_scram_cred_from_salted(kb_scram_mech m, const uint8_t *salted, size_t salted_len,
                                 const uint8_t *salt, size_t salt_len, int32_t iterations,
                                 kb_scram_cred *out)
{
    const EVP_MD *md = mech_md(m);
    size_t hlen = kb_scram_hash_len(m);
    if (md == NULL || salted_len > INT32_MAX || salt_len > KB_SCRAM_SALT_MAX ||
        iterations < KB_SCRAM_MIN_ITERATIONS || iterations > KB_SCRAM_MAX_ITERATIONS)
        return KP_ERR__INVAL;
    memset(out, 0, sizeof(*out));
    out->sc_mech = m;
    out->sc_iterations = iterations;
    out->sc_salt_len = salt_len;
    if (salt_len > 0)
        memcpy(out->sc_salt, salt, salt_len);
    static const uint8_t no_key;
    if (salted_len == 0) /* Kafka accepts an empty SaltedPassword too */
        salted = &no_key;
    uint8_t client_key[KB_SCRAM_HASH_MAX];
    unsigned int dlen = 0;
    bool ok = hmac(md, salted, salted_len, "Client Key", 10, client_key) &&
              EVP_Digest(client_key, hlen, out->sc_stored_key, &dlen, md, NULL) &&
              hmac(md, salted, salted_len, "Server Key", 10, out->sc_server_key);
    OPENSSL_cleanse(client_key, sizeof client_key);
    return ok ? KP_ERR_NONE : KP_ERR__NOMEM;
}

kp_err kb_scram_cred_from_password(kb_scram_mech m, const char *password, const uint8_t *salt,
                                   size_t salt_len, int32_t iterations, kb_scram_cred *out)
{
    const EVP_MD *md = mech_md(m);
    size_t hlen = kb_scram_hash_len(m);
    uint8_t salted[KB_SCRAM_HASH_MAX];
    if (md == NULL || salt_len == 0 || salt_len > KB_SCRAM_SALT_MAX || iterations <= 0)
        return KP_ERR__INVAL;
    if (!PKCS5_PBKDF2_HMAC(password, (int)strlen(password), salt, (int)salt_len, iterations, md,
                           (int)hlen, salted))
        return KP_ERR__NOMEM;
    kp_err e = kb_scram_cred_from_salted(m, salted, hlen, salt, salt_len, iterations, out);
    OPENSSL_cleanse(salted, sizeof salted);
    return e;
}

/* ---- base64 ------------------------------------------------------------------ */

size_t kb_b64_encode(char *out, size_t cap, const uint8_t *in, size_t n)
{
    size_t need = 4 * ((n + 2) / 3) + 1;
    if (cap < need) {
        if (cap > 0)
            out[0] = '\0';
        return 0;
    }
    return (size_t)EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

bool kb_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap, size_t *out_len)
{
    if (n % 4 != 0 || n / 4 * 3 > cap || n > (size_t)INT32_MAX)
        return false;
    size_t pad = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == '=' && i >= n - 2)
            pad++;
        else if (!b64_char(in[i]) || pad > 0)
            return false;
    }
    if (n == 0) {
        *out_len = 0;
        return true;
    }
    if (EVP_DecodeBlock(out, (const unsigned char *)in, (int)n) < 0)
        return false;
    *out_len = n / 4 * 3 - pad;
    return true;
}

/* ---- the exchange --------------------------------------------------------------- */

kb_scram *kb_scram_new(kb_scram_mech m, const kb_scram_store *store)
{
    if (mech_md(m) == NULL)
        return NULL;
    kb_scram *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->mech = m;
    s->md = mech_md(m);
    s->hlen = kb_scram_hash_len(m);
    s->store = store;
    s->why = "";
    return s;
}

void kb_scram_free(kb_scram *s)
{
    if (s == NULL)
        return;
    free(s->gs2);
    free(s->bare);
    free(s->server_first);
    free(s->out);
    OPENSSL_cleanse(&s->cred, sizeof s->cred);
    free(s);
}

void kb_scram_set_server_nonce(kb_scram *s, const char *nonce)
{
    snprintf(s->fixed_nonce, sizeof s->fixed_nonce, "%s", nonce);
}

const char *kb_scram_user(const kb_scram *s)
{
    return s->user;
}

const char *kb_scram_why(const kb_scram *s)
{
    return s->why;
}

static kb_auth_step scram_fail(kb_scram *s, const char *why)
{
    s->state = S_FAILED;
    s->why = why;
    return KB_AUTH_FAILURE;
}

/* Splits the next field off rest; false when none is left. */
static bool take(span *rest, span *f)
{
    if (rest->end)
        return false;
    const char *comma = memchr(rest->p, ',', rest->n);
    f->p = rest->p;
    f->n = comma != NULL ? (size_t)(comma - rest->p) : rest->n;
    f->end = false;
    if (comma == NULL) {
        rest->end = true;
        rest->n = 0;
    } else {
        rest->n -= f->n + 1;
        rest->p = comma + 1;
    }
    return true;
}

/* A field "<k>=<value>"; value points past the '='. */
static bool attr(span f, char k, span *value)
{
    if (f.n < 2 || f.p[0] != k || f.p[1] != '=')
        return false;
    value->p = f.p + 2;
    value->n = f.n - 2;
    value->end = false;
    return true;
}

/* RFC 5802 saslname: "=2C" is ',', "=3D" is '=', other '=' malformed. */
static bool decode_saslname(span v, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < v.n; i++) {
        char c = v.p[i];
        if (c == '=') {
            if (i + 2 >= v.n)
                return false;
            if (v.p[i + 1] == '2' && v.p[i + 2] == 'C')
                c = ',';
            else if (v.p[i + 1] == '3' && v.p[i + 2] == 'D')
                c = '=';
            else
                return false;
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return o > 0;
}

/* Bytes a SCRAM message may hold: no NUL or other control characters. */
static bool printable_message(const uint8_t *in, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (in[i] < 0x20 || in[i] == 0x7f)
            return false;
    return true;
}

static bool valid_nonce(span v)
{
    for (size_t i = 0; i < v.n; i++)
        if (v.p[i] < 0x21 || v.p[i] > 0x7e || v.p[i] == ',')
            return false;
    return v.n > 0;
}

/* Extensions after the nonce: tokenauth (delegation tokens) is refused,
 * others are ignored as Kafka ignores them. */
static const char *check_extensions(span rest)
{
    span f;
    while (take(&rest, &f)) {
        const char *eq = memchr(f.p, '=', f.n);
        if (eq == NULL || eq == f.p)
            return "Authentication failed: malformed SCRAM extension";
        if ((size_t)(eq - f.p) == 9 && memcmp(f.p, "tokenauth", 9) == 0)
            return "Authentication failed: delegation tokens are not supported";
    }
    return NULL;
}

/* Parses the gs2 header; sets authzid (may be empty) and the header length. */
static const char *parse_gs2(span *rest, span *authzid)
{
    span f;
    if (!take(rest, &f) || f.n != 1 || (f.p[0] != 'n' && f.p[0] != 'y'))
        return f.n > 0 && f.p[0] == 'p' ? "Authentication failed: channel binding is not supported"
                                        : "Authentication failed: malformed client-first message";
    if (!take(rest, &f) || rest->end)
        return "Authentication failed: malformed client-first message";
    authzid->n = 0;
    if (f.n > 0 && !attr(f, 'a', authzid))
        return "Authentication failed: malformed client-first message";
    return NULL;
}

static bool save(char **dst, size_t *dlen, const char *p, size_t n)
{
    *dst = malloc(n + 1);
    if (*dst == NULL)
        return false;
    memcpy(*dst, p, n);
    (*dst)[n] = '\0';
    *dlen = n;
    return true;
}

/* Builds server-first from the client nonce and a fresh server nonce. */
static kb_auth_step server_first(kb_scram *s, span cnonce, const uint8_t **out, size_t *out_len)
{
    char snonce[SCRAM_NONCE_MAX + 1];
    if (s->fixed_nonce[0] != '\0') {
        snprintf(snonce, sizeof snonce, "%s", s->fixed_nonce);
    } else {
        uint8_t rnd[SCRAM_NONCE_BYTES];
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return scram_fail(s, "Authentication failed: no randomness");
        kb_b64_encode(snonce, sizeof snonce, rnd, sizeof rnd);
    }
    char salt[4 * ((KB_SCRAM_SALT_MAX + 2) / 3) + 1];
    kb_b64_encode(salt, sizeof salt, s->cred.sc_salt, s->cred.sc_salt_len);
    size_t cap = cnonce.n + strlen(snonce) + strlen(salt) + 32;
    s->server_first = malloc(cap);
    if (s->server_first == NULL)
        return scram_fail(s, "Authentication failed: out of memory");
    int n = snprintf(s->server_first, cap, "r=%.*s%s,s=%s,i=%d", (int)cnonce.n, cnonce.p, snonce,
                     salt, (int)s->cred.sc_iterations);
    s->server_first_len = (size_t)n;
    s->nonce_len = cnonce.n + strlen(snonce);
    s->state = S_CLIENT_FINAL;
    *out = (const uint8_t *)s->server_first;
    *out_len = s->server_first_len;
    return KB_AUTH_CONTINUE;
}

static kb_auth_step client_first(kb_scram *s, const char *in, size_t len, const uint8_t **out,
                                 size_t *out_len)
{
    static const char malformed[] = "Authentication failed: malformed client-first message";
    span rest = {in, len, false}, authzid = {NULL, 0, false}, f, v;
    const char *why = parse_gs2(&rest, &authzid);
    if (why != NULL)
        return scram_fail(s, why);
    size_t gs2_len = (size_t)(rest.p - in);
    if (!save(&s->gs2, &s->gs2_len, in, gs2_len) || !save(&s->bare, &s->bare_len, rest.p, rest.n))
        return scram_fail(s, "Authentication failed: out of memory");
    if (!take(&rest, &f) || !attr(f, 'n', &v))
        return scram_fail(s, f.n > 1 && f.p[0] == 'm' && f.p[1] == '='
                                 ? "Authentication failed: mandatory extensions are not supported"
                                 : malformed);
    if (!decode_saslname(v, s->user, sizeof s->user))
        return scram_fail(s, "Authentication failed: invalid user name");
    span cnonce;
    if (!take(&rest, &f) || !attr(f, 'r', &cnonce) || !valid_nonce(cnonce))
        return scram_fail(s, malformed);
    if ((why = check_extensions(rest)) != NULL)
        return scram_fail(s, why);
    char az[KB_SCRAM_USER_MAX + 1];
    if (authzid.n > 0 && (!decode_saslname(authzid, az, sizeof az) || strcmp(az, s->user) != 0))
        return scram_fail(s, "Authentication failed: Client requested an authorization id that "
                             "is different from username");
    const kb_scram_cred *cred = kb_scram_store_find(s->store, s->user, strlen(s->user), s->mech);
    if (cred == NULL)
        return scram_fail(s, "Authentication failed: Invalid user credentials");
    s->cred = *cred;
    return server_first(s, cnonce, out, out_len);
}

/* Finds the last ",p=" of the client-final message. */
static const char *find_proof(const char *in, size_t len)
{
    for (size_t i = len; i >= 3; i--)
        if (in[i - 3] == ',' && in[i - 2] == 'p' && in[i - 1] == '=')
            return in + i - 3;
    return NULL;
}

/* c= must be the base64 of the gs2 header; r= the combined nonce, exactly. */
static bool check_binding_and_nonce(kb_scram *s, span rest)
{
    span f, v;
    uint8_t cb[256];
    size_t cb_len = 0;
    if (!take(&rest, &f) || !attr(f, 'c', &v) || v.n > 4 * sizeof cb / 3 ||
        !kb_b64_decode(v.p, v.n, cb, sizeof cb, &cb_len) || cb_len != s->gs2_len ||
        memcmp(cb, s->gs2, cb_len) != 0)
        return false;
    if (!take(&rest, &f) || !attr(f, 'r', &v) || v.n != s->nonce_len ||
        memcmp(v.p, s->server_first + 2, v.n) != 0)
        return false;
    return true;
}

/* AuthMessage = client-first-bare "," server-first "," client-final-without-proof */
static char *auth_message(const kb_scram *s, const char *final, size_t final_len, size_t *len)
{
    *len = s->bare_len + 1 + s->server_first_len + 1 + final_len;
    char *am = malloc(*len);
    if (am == NULL)
        return NULL;
    memcpy(am, s->bare, s->bare_len);
    am[s->bare_len] = ',';
    memcpy(am + s->bare_len + 1, s->server_first, s->server_first_len);
    am[s->bare_len + 1 + s->server_first_len] = ',';
    memcpy(am + s->bare_len + s->server_first_len + 2, final, final_len);
    return am;
}

/* True when H(proof XOR HMAC(StoredKey, am)) == StoredKey, in constant time. */
static bool proof_ok(const kb_scram *s, const uint8_t *proof, const char *am, size_t am_len)
{
    uint8_t sig[KB_SCRAM_HASH_MAX], key[KB_SCRAM_HASH_MAX], stored[KB_SCRAM_HASH_MAX];
    unsigned int dlen = 0;
    if (!hmac(s->md, s->cred.sc_stored_key, s->hlen, am, am_len, sig))
        return false;
    for (size_t i = 0; i < s->hlen; i++)
        key[i] = proof[i] ^ sig[i];
    bool ok = EVP_Digest(key, s->hlen, stored, &dlen, s->md, NULL) &&
              CRYPTO_memcmp(stored, s->cred.sc_stored_key, s->hlen) == 0;
    OPENSSL_cleanse(key, sizeof key);
    return ok;
}

static kb_auth_step client_final(kb_scram *s, const char *in, size_t len, const uint8_t **out,
                                 size_t *out_len)
{
    static const char bad_creds_256[] = "Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism SCRAM-SHA-256";
    static const char bad_creds_512[] = "Authentication failed during authentication due to "
                                        "invalid credentials with SASL mechanism SCRAM-SHA-512";
    const char *bad = s->mech == KB_SCRAM_SHA_256 ? bad_creds_256 : bad_creds_512;
    const char *pp = find_proof(in, len);
    uint8_t proof[KB_SCRAM_HASH_MAX + 2];
    size_t proof_len = 0;
    size_t without = pp != NULL ? (size_t)(pp - in) : 0;
    if (pp == NULL || len - without - 3 > 4 * ((KB_SCRAM_HASH_MAX + 2) / 3) ||
        !kb_b64_decode(pp + 3, len - without - 3, proof, sizeof proof, &proof_len) ||
        proof_len != s->hlen)
        return scram_fail(s, "Authentication failed: malformed client-final message");
    /* Kafka words every client-final failure the same way. */
    if (!check_binding_and_nonce(s, (span){in, without, false}))
        return scram_fail(s, bad);
    size_t am_len;
    char *am = auth_message(s, in, without, &am_len);
    if (am == NULL)
        return scram_fail(s, "Authentication failed: out of memory");
    uint8_t ssig[KB_SCRAM_HASH_MAX];
    bool ok = proof_ok(s, proof, am, am_len) &&
              hmac(s->md, s->cred.sc_server_key, s->hlen, am, am_len, ssig);
    free(am);
    if (!ok)
        return scram_fail(s, bad);
    size_t cap = 2 + 4 * ((KB_SCRAM_HASH_MAX + 2) / 3) + 1;
    if ((s->out = malloc(cap)) == NULL)
        return scram_fail(s, "Authentication failed: out of memory");
    memcpy(s->out, "v=", 2);
    *out_len = 2 + kb_b64_encode(s->out + 2, cap - 2, ssig, s->hlen);
    *out = (const uint8_t *)s->out;
    s->state = S_DONE;
    return KB_AUTH_SUCCESS;
}

kb_auth_step kb_scram_step(kb_scram *s, const uint8_t *in, size_t len, const uint8_t **out,
                           size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!printable_message(in, len))
        return scram_fail(s, "Authentication failed: malformed SCRAM message");
    switch (s->state) {
    case S_CLIENT_FIRST:
        return client_first(s, (const char *)in, len, out, out_len);
    case S_CLIENT_FINAL:
        return client_final(s, (const char *)in, len, out, out_len);
    default:
        return scram_fail(s, "Authentication failed: unexpected SCRAM message");
    }
}
