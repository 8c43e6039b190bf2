#include "kb_tls.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#define KB_TLS_PEM_MAX (1024 * 1024) /* a keystore or truststore file */

struct kb_tls_ctx {
    SSL_CTX *ssl_ctx;
};

struct kb_tls {
    SSL *ssl;
    char why[160];
};

typedef struct ctx_build {
    const kb_config *cfg;
    const kb_listener *l;
    SSL_CTX *ctx;
    char *err;
    size_t errlen;
} ctx_build;

/* ---- configuration helpers ----------------------------------------------- */

static const char *key_value(const ctx_build *b, const char *key)
{
    return kb_config_listener_value(b->cfg, b->l->li_name, key, true);
}

static kp_err fail(const ctx_build *b, const char *key, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    char ossl[160] = "";
    if (e != 0)
        ERR_error_string_n(e, ossl, sizeof ossl);
    ERR_clear_error();
    snprintf(b->err, b->errlen, "config: listener %s: %s: %s%s%s", b->l->li_name, key, what,
             ossl[0] ? ": " : "", ossl);
    return KP_ERR__INVAL;
}

/* Reads a whole PEM file (bounded) into a NUL-terminated buffer. */
static char *read_pem_file(const char *path, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        *why = strerror(errno);
        return NULL;
    }
    char *buf = malloc(KB_TLS_PEM_MAX + 1);
    size_t n = buf != NULL ? fread(buf, 1, KB_TLS_PEM_MAX + 1, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (buf == NULL || bad || n > KB_TLS_PEM_MAX) {
        *why = buf == NULL ? "out of memory" : bad ? "read error" : "file larger than 1 MiB";
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Appends the base64 body s[0..n) without whitespace, in 64-column lines. */
static size_t wrap_body(char *out, const char *s, size_t n)
{
    size_t o = 0, col = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')
            continue;
        out[o++] = s[i];
        if (++col == 64) {
            out[o++] = '\n';
            col = 0;
        }
    }
    if (col != 0)
        out[o++] = '\n';
    return o;
}

/*
 * PEM text given on one line (an inline key set through the environment):
 * puts the BEGIN/END lines and the base64 back on lines of their own.
 * Text that already has line breaks is returned as a copy. Caller frees.
 */
static char *pem_normalize(const char *in)
{
    size_t len = strlen(in);
    char *out = malloc(len * 2 + 2);
    if (out == NULL || strchr(in, '\n') != NULL) {
        if (out != NULL)
            memcpy(out, in, len + 1);
        return out;
    }
    size_t o = 0;
    const char *p = in;
    const char *begin;
    while ((begin = strstr(p, "-----BEGIN ")) != NULL) {
        const char *hdr_end = strstr(begin + 11, "-----");
        const char *end = hdr_end ? strstr(hdr_end + 5, "-----END ") : NULL;
        const char *end_end = end ? strstr(end + 9, "-----") : NULL;
        if (end_end == NULL)
            break;
        size_t hl = (size_t)(hdr_end + 5 - begin);
        memcpy(out + o, begin, hl);
        o += hl;
        out[o++] = '\n';
        o += wrap_body(out + o, hdr_end + 5, (size_t)(end - hdr_end - 5));
        size_t el = (size_t)(end_end + 5 - end);
        memcpy(out + o, end, el);
        o += el;
        out[o++] = '\n';
        p = end_end + 5;
    }
    out[o] = '\0';
    return out;
}

/* The PEM text of a store: the file at loc_key, else the inline key. */
static kp_err pem_text(const ctx_build *b, const char *loc_key, const char *inline_key,
                       char **out)
{
    const char *loc = key_value(b, loc_key);
    const char *inl = inline_key != NULL ? key_value(b, inline_key) : NULL;
    *out = NULL;
    if (loc != NULL && loc[0] != '\0') {
        const char *why = "";
        char *raw = read_pem_file(loc, &why);
        if (raw == NULL)
            return fail(b, loc_key, why);
        *out = raw;
        return KP_ERR_NONE;
    }
    if (inl != NULL && inl[0] != '\0') {
        *out = pem_normalize(inl);
        return *out != NULL ? KP_ERR_NONE : KP_ERR__NOMEM;
    }
    return KP_ERR_NONE;
}

static kp_err check_store_type(const ctx_build *b, const char *key)
{
    const char *type = key_value(b, key);
    if (type == NULL || type[0] == '\0' || strcasecmp(type, "PEM") == 0)
        return KP_ERR_NONE;
    return fail(b, key, "only PEM stores are supported (set it to PEM)");
}

/* ---- keystore ------------------------------------------------------------- */

static int no_prompt_cb(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    if (pw == NULL)
        return -1; /* never ask a terminal */
    size_t n = strlen(pw);
    if (n > (size_t)size)
        return -1;
    memcpy(buf, pw, n);
    return (int)n;
}

static kp_err load_chain(const ctx_build *b, const char *pem, const char *key)
{
    BIO *bio = BIO_new_mem_buf(pem, -1);
    X509 *leaf = bio ? PEM_read_bio_X509(bio, NULL, no_prompt_cb, NULL) : NULL;
    if (leaf == NULL) {
        BIO_free(bio);
        return fail(b, key, "no certificate found");
    }
    int ok = SSL_CTX_use_certificate(b->ctx, leaf);
    X509_free(leaf);
    X509 *extra;
    while (ok && (extra = PEM_read_bio_X509(bio, NULL, no_prompt_cb, NULL)) != NULL) {
        if (!SSL_CTX_add0_chain_cert(b->ctx, extra)) {
            X509_free(extra);
            ok = 0;
        }
    }
    ERR_clear_error(); /* the loop ends on "no start line" */
    BIO_free(bio);
    return ok ? KP_ERR_NONE : fail(b, key, "certificate rejected");
}

static kp_err load_key(const ctx_build *b, const char *pem, const char *key)
{
    const char *pw = key_value(b, "ssl.key.password");
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *pk = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_prompt_cb, (void *)pw) : NULL;
    BIO_free(bio);
    if (pk == NULL)
        return fail(b, key, pw ? "cannot read the private key (wrong ssl.key.password?)"
                                : "cannot read the private key (encrypted without "
                                  "ssl.key.password?)");
    int ok = SSL_CTX_use_PrivateKey(b->ctx, pk);
    EVP_PKEY_free(pk);
    if (!ok || !SSL_CTX_check_private_key(b->ctx))
        return fail(b, key, "the private key does not match the certificate");
    return KP_ERR_NONE;
}

static kp_err load_keystore(const ctx_build *b)
{
    kp_err e = check_store_type(b, "ssl.keystore.type");
    if (e != KP_ERR_NONE)
        return e;
    char *pem = NULL;
    const char *loc = key_value(b, "ssl.keystore.location");
    bool from_file = loc != NULL && loc[0] != '\0';
    if ((e = pem_text(b, "ssl.keystore.location", "ssl.keystore.certificate.chain", &pem)) !=
        KP_ERR_NONE)
        return e;
    if (pem == NULL)
        return fail(b, "ssl.keystore.location",
                    "a TLS listener needs a certificate (ssl.keystore.location or "
                    "ssl.keystore.certificate.chain + ssl.keystore.key)");
    const char *chain_key = from_file ? "ssl.keystore.location" : "ssl.keystore.certificate.chain";
    e = load_chain(b, pem, chain_key);
    if (e == KP_ERR_NONE && !from_file) {
        free(pem);
        const char *inl = key_value(b, "ssl.keystore.key");
        pem = inl != NULL && inl[0] != '\0' ? pem_normalize(inl) : NULL;
        if (pem == NULL)
            e = fail(b, "ssl.keystore.key", "missing (needed with an inline chain)");
    }
    if (e == KP_ERR_NONE)
        e = load_key(b, pem, from_file ? "ssl.keystore.location" : "ssl.keystore.key");
    free(pem);
    return e;
}

/* ---- truststore and client authentication --------------------------------- */

static kp_err load_truststore(const ctx_build *b, int *ncerts)
{
    kp_err e = check_store_type(b, "ssl.truststore.type");
    char *pem = NULL;
    *ncerts = 0;
    if (e == KP_ERR_NONE)
        e = pem_text(b, "ssl.truststore.location", "ssl.truststore.certificates", &pem);
    if (e != KP_ERR_NONE || pem == NULL)
        return e;
    X509_STORE *store = SSL_CTX_get_cert_store(b->ctx);
    BIO *bio = BIO_new_mem_buf(pem, -1);
    X509 *x;
    while (bio != NULL && (x = PEM_read_bio_X509(bio, NULL, no_prompt_cb, NULL)) != NULL) {
        int ok = X509_STORE_add_cert(store, x) && SSL_CTX_add_client_CA(b->ctx, x);
        X509_free(x);
        if (!ok) {
            BIO_free(bio);
            free(pem);
            return fail(b, "ssl.truststore.certificates", "certificate rejected");
        }
        (*ncerts)++;
    }
    ERR_clear_error();
    BIO_free(bio);
    free(pem);
    if (*ncerts == 0)
        return fail(b, "ssl.truststore.location", "no certificate found");
    return KP_ERR_NONE;
}

static kp_err setup_client_auth(const ctx_build *b)
{
    /* Kafka: on SASL_SSL only the listener-prefixed key applies. */
    bool sasl = b->l->li_protocol == KB_SEC_SASL_SSL;
    const char *v = kb_config_listener_value(b->cfg, b->l->li_name, "ssl.client.auth", !sasl);
    int mode = SSL_VERIFY_NONE;
    if (v == NULL || v[0] == '\0' || strcasecmp(v, "none") == 0)
        mode = SSL_VERIFY_NONE;
    else if (strcasecmp(v, "requested") == 0)
        mode = SSL_VERIFY_PEER;
    else if (strcasecmp(v, "required") == 0)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else
        return fail(b, "ssl.client.auth", "expected none, requested or required");
    int ncerts = 0;
    kp_err e = load_truststore(b, &ncerts);
    if (e != KP_ERR_NONE)
        return e;
    if (mode != SSL_VERIFY_NONE && ncerts == 0)
        return fail(b, "ssl.truststore.location",
                    "client authentication needs a truststore (ssl.truststore.location or "
                    "ssl.truststore.certificates)");
    SSL_CTX_set_verify(b->ctx, mode, NULL);
    return KP_ERR_NONE;
}

/* ---- protocols and ciphers ------------------------------------------------- */

static kp_err setup_protocols(const ctx_build *b)
{
    const char *v = key_value(b, "ssl.enabled.protocols");
    int lo = 0, hi = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v != NULL && v[0] != '\0' ? v : "TLSv1.2,TLSv1.3");
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        int ver;
        if (strcasecmp(t, "TLSv1.2") == 0)
            ver = TLS1_2_VERSION;
        else if (strcasecmp(t, "TLSv1.3") == 0)
            ver = TLS1_3_VERSION;
        else
            return fail(b, "ssl.enabled.protocols", "only TLSv1.2 and TLSv1.3 are supported");
        lo = lo == 0 || ver < lo ? ver : lo;
        hi = ver > hi ? ver : hi;
    }
    if (lo == 0)
        return fail(b, "ssl.enabled.protocols", "no protocol listed");
    if (!SSL_CTX_set_min_proto_version(b->ctx, lo) || !SSL_CTX_set_max_proto_version(b->ctx, hi))
        return fail(b, "ssl.enabled.protocols", "rejected by OpenSSL");
    return KP_ERR_NONE;
}

/* Finds a cipher by its IANA (Java) or OpenSSL name. */
static const SSL_CIPHER *find_cipher(STACK_OF(SSL_CIPHER) * all, const char *name)
{
    for (int i = 0; i < sk_SSL_CIPHER_num(all); i++) {
        const SSL_CIPHER *c = sk_SSL_CIPHER_value(all, i);
        const char *std = SSL_CIPHER_standard_name(c);
        if ((std != NULL && strcmp(std, name) == 0) || strcmp(SSL_CIPHER_get_name(c), name) == 0)
            return c;
    }
    return NULL;
}

/* Appends name to list (":"-separated); false if it does not fit. */
static bool list_add(char *list, size_t cap, const char *name)
{
    size_t n = strlen(list);
    int w = snprintf(list + n, cap - n, "%s%s", n ? ":" : "", name);
    return w > 0 && (size_t)w < cap - n;
}

static kp_err setup_ciphers(const ctx_build *b)
{
    const char *v = key_value(b, "ssl.cipher.suites");
    if (v == NULL || v[0] == '\0')
        return KP_ERR_NONE; /* OpenSSL's defaults */
    SSL *probe = SSL_new(b->ctx);
    if (probe == NULL || !SSL_set_cipher_list(probe, "ALL:COMPLEMENTOFALL"))
        return SSL_free(probe), fail(b, "ssl.cipher.suites", "cannot list ciphers");
    STACK_OF(SSL_CIPHER) *all = SSL_get_ciphers(probe);
    char tls12[2048] = "", tls13[512] = "", buf[2048];
    snprintf(buf, sizeof buf, "%s", v);
    kp_err e = KP_ERR_NONE;
    char *save = NULL;
    for (char *t = strtok_r(buf, ", ", &save); t && e == KP_ERR_NONE; t = strtok_r(NULL, ", ", &save)) {
        const SSL_CIPHER *c = find_cipher(all, t);
        bool v13 = c != NULL && strcmp(SSL_CIPHER_get_version(c), "TLSv1.3") == 0;
        if (c == NULL)
            e = fail(b, "ssl.cipher.suites", "unknown cipher suite");
        else if (!list_add(v13 ? tls13 : tls12, v13 ? sizeof tls13 : sizeof tls12,
                           v13 ? SSL_CIPHER_standard_name(c) : SSL_CIPHER_get_name(c)))
            e = fail(b, "ssl.cipher.suites", "too long");
    }
    SSL_free(probe);
    if (e == KP_ERR_NONE && tls12[0] && !SSL_CTX_set_cipher_list(b->ctx, tls12))
        e = fail(b, "ssl.cipher.suites", "TLS 1.2 suites rejected");
    if (e == KP_ERR_NONE && tls13[0] && !SSL_CTX_set_ciphersuites(b->ctx, tls13))
        e = fail(b, "ssl.cipher.suites", "TLS 1.3 suites rejected");
    return e;
}

/* ---- context ---------------------------------------------------------------- */

bool kb_tls_ktls_probe(char *why, size_t cap)
{
#ifdef OPENSSL_NO_KTLS
    snprintf(why, cap, "OpenSSL built without kernel TLS");
    return false;
#else
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, cap, "socket: %s", strerror(errno));
        return false;
    }
    /* An unconnected socket: ENOTCONN means the ULP exists, ENOENT not. */
    int rc = setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", sizeof("tls"));
    int e = rc == 0 ? 0 : errno;
    close(fd);
    if (rc == 0 || e == ENOTCONN) {
        snprintf(why, cap, "kernel tls module present");
        return true;
    }
    snprintf(why, cap, "kernel tls module unavailable (%s)", strerror(e));
    return false;
#endif
}

static kp_err ctx_configure(ctx_build *b, bool ktls)
{
    uint64_t opts = SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                    SSL_OP_NO_COMPRESSION;
#ifndef OPENSSL_NO_KTLS
    if (ktls)
        opts |= SSL_OP_ENABLE_KTLS;
#else
    (void)ktls;
#endif
    SSL_CTX_set_options(b->ctx, opts);
    SSL_CTX_set_mode(b->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                 SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char sid[] = "runnel";
    SSL_CTX_set_session_id_context(b->ctx, sid, sizeof sid - 1);
    kp_err e = setup_protocols(b);
    if (e == KP_ERR_NONE)
        e = setup_ciphers(b);
    if (e == KP_ERR_NONE)
        e = load_keystore(b);
    if (e == KP_ERR_NONE)
        e = setup_client_auth(b);
    return e;
}

kp_err kb_tls_ctx_new(const kb_config *cfg, const kb_listener *l, bool ktls, kb_tls_ctx **out,
                      char *err, size_t errlen)
{
    *out = NULL;
    ERR_clear_error();
    kb_tls_ctx *c = calloc(1, sizeof(*c));
    if (c == NULL || (c->ssl_ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
        free(c);
        snprintf(err, errlen, "listener %s: cannot create a TLS context", l->li_name);
        return KP_ERR__NOMEM;
    }
    ctx_build b = {cfg, l, c->ssl_ctx, err, errlen};
    kp_err e = ctx_configure(&b, ktls);
    if (e != KP_ERR_NONE) {
        kb_tls_ctx_free(c);
        return e;
    }
    *out = c;
    return KP_ERR_NONE;
}

void kb_tls_ctx_free(kb_tls_ctx *ctx)
{
    if (ctx == NULL)
        return;
    SSL_CTX_free(ctx->ssl_ctx);
    free(ctx);
}

/* ---- sessions ------------------------------------------------------------------ */

kb_tls *kb_tls_new(kb_tls_ctx *ctx, int fd)
{
    kb_tls *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return NULL;
    t->ssl = SSL_new(ctx->ssl_ctx);
    if (t->ssl == NULL || !SSL_set_fd(t->ssl, fd)) {
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    SSL_set_accept_state(t->ssl);
    return t;
}

void kb_tls_free(kb_tls *t)
{
    if (t == NULL)
        return;
    ERR_clear_error();
    if (SSL_is_init_finished(t->ssl))
        (void)SSL_shutdown(t->ssl); /* one non-blocking try at close_notify */
    SSL_free(t->ssl);
    ERR_clear_error();
    free(t);
}

/* Maps a failed SSL call to a kb_tls_rc, recording why. */
static int tls_result(kb_tls *t, int rc)
{
    int saved = errno;
    switch (SSL_get_error(t->ssl, rc)) {
    case SSL_ERROR_WANT_READ:
        return KB_TLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE:
        return KB_TLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN:
        return KB_TLS_CLOSED;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            if (saved == 0 || saved == ECONNRESET)
                return KB_TLS_CLOSED;
            snprintf(t->why, sizeof t->why, "%s", strerror(saved));
            return KB_TLS_FAILED;
        }
        break;
    default:
        break;
    }
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, t->why, sizeof t->why);
    else
        snprintf(t->why, sizeof t->why, "TLS error");
    ERR_clear_error();
    return KB_TLS_FAILED;
}

int kb_tls_handshake(kb_tls *t)
{
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(t->ssl);
    return rc == 1 ? KB_TLS_DONE : tls_result(t, rc);
}

ssize_t kb_tls_read(kb_tls *t, void *buf, size_t len)
{
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_read_ex(t->ssl, buf, len, &n);
    return rc == 1 ? (ssize_t)n : tls_result(t, rc);
}

ssize_t kb_tls_write(kb_tls *t, const void *buf, size_t len)
{
    ERR_clear_error();
    errno = 0;
    size_t n = 0;
    int rc = SSL_write_ex(t->ssl, buf, len, &n);
    return rc == 1 ? (ssize_t)n : tls_result(t, rc);
}

ssize_t kb_tls_sendfile(kb_tls *t, int fd, off_t off, size_t len)
{
    ERR_clear_error();
    errno = 0;
    ossl_ssize_t n = SSL_sendfile(t->ssl, fd, off, len, 0);
    if (n > 0)
        return (ssize_t)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        ERR_clear_error();
        return KB_TLS_WANT_WRITE;
    }
    return tls_result(t, (int)n);
}

size_t kb_tls_pending(const kb_tls *t)
{
    int n = SSL_pending(t->ssl);
    return n > 0 ? (size_t)n : 0;
}

bool kb_tls_ktls_send(kb_tls *t)
{
#ifndef OPENSSL_NO_KTLS
    return BIO_get_ktls_send(SSL_get_wbio(t->ssl)) != 0;
#else
    (void)t;
    return false;
#endif
}

void kb_tls_principal(const kb_tls *t, char *buf, size_t cap)
{
    X509 *peer = SSL_get0_peer_certificate(t->ssl);
    BIO *bio = peer != NULL && SSL_get_verify_result(t->ssl) == X509_V_OK
                   ? BIO_new(BIO_s_mem())
                   : NULL;
    snprintf(buf, cap, "User:ANONYMOUS");
    if (bio == NULL)
        return;
    if (X509_NAME_print_ex(bio, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) >= 0) {
        char *p = NULL;
        long n = BIO_get_mem_data(bio, &p);
        if (n > 0 && n < 4096)
            snprintf(buf, cap, "User:%.*s", (int)n, p);
    }
    BIO_free(bio);
}

void kb_tls_describe(const kb_tls *t, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s %s", SSL_get_version(t->ssl), SSL_get_cipher_name(t->ssl));
}

const char *kb_tls_why(const kb_tls *t)
{
    return t->why;
}
