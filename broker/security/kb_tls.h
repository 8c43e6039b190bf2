/*
 * kb_tls: TLS for SSL and SASL_SSL listeners, on OpenSSL 3.
 *
 * Job: build one server context per TLS listener from Kafka's ssl.* keys
 * (listener.name.<name>.ssl.* overriding), and drive each connection's TLS
 * session without ever blocking: the handshake, reads, writes and, where the
 * kernel offers kernel TLS, SSL_sendfile for file ranges.
 *
 * Keys read (all PEM; JKS and PKCS12 stores are refused with a message):
 *   ssl.keystore.type=PEM      with ssl.keystore.location (one file holding
 *                              the private key and the certificate chain)
 *                              and ssl.key.password for an encrypted key, or
 *                              inline ssl.keystore.certificate.chain and
 *                              ssl.keystore.key
 *   ssl.truststore.type=PEM    with ssl.truststore.location or inline
 *                              ssl.truststore.certificates
 *   ssl.client.auth            none | requested | required (on a SASL_SSL
 *                              listener only the listener-prefixed key
 *                              counts, as in Kafka)
 *   ssl.enabled.protocols      TLSv1.2 and/or TLSv1.3 (nothing older)
 *   ssl.cipher.suites          IANA names (as Java spells them) or OpenSSL
 *                              names; TLS 1.3 suites go to the 1.3 list
 * Inline PEM may be given on one line (as environment variables are): it is
 * re-wrapped before parsing.
 *
 * Invariants:
 *   1. Only TLS 1.2 and 1.3 are negotiated; renegotiation is refused.
 *   2. No call here blocks: every I/O function returns KB_TLS_WANT_READ or
 *      KB_TLS_WANT_WRITE instead, and the caller waits for that event.
 *   3. A write retried after KB_TLS_WANT_* passes the same bytes from the
 *      same address, with the same length. Without kernel TLS OpenSSL has
 *      copied them already (SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER), but over
 *      kernel TLS it sends from the caller's buffer and resends from the
 *      pointer of the first attempt, so that buffer must stay put.
 *   4. kb_tls_sendfile is used only when kb_tls_ktls_send() is true.
 *
 * Ownership: a kb_tls_ctx belongs to the server (one per listener) and must
 * outlive every kb_tls made from it; a kb_tls belongs to its connection and
 * does not own the fd.
 *
 * Threading: loop thread only (OpenSSL's error queue is per thread).
 *
 * Errors: kb_tls_ctx_new returns KP_ERR__INVAL (bad key, file or value)
 * or KP_ERR__NOMEM with one line in err naming the key. The I/O functions
 * return a byte count > 0 or a negative kb_tls_rc; after KB_TLS_FAILED,
 * kb_tls_why() says why.
 */
#ifndef KB_TLS_H
#define KB_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "kb_config.h"
#include "kp_err.h"

typedef struct kb_tls_ctx kb_tls_ctx;
typedef struct kb_tls kb_tls;

typedef enum kb_tls_rc {
    KB_TLS_DONE = 0,        /* handshake complete */
    KB_TLS_WANT_READ = -1,  /* retry once the socket is readable */
    KB_TLS_WANT_WRITE = -2, /* retry once the socket is writable */
    KB_TLS_CLOSED = -3,     /* the peer closed (close_notify or EOF) */
    KB_TLS_FAILED = -4,     /* protocol or socket error: close */
} kb_tls_rc;

/*
 * Probes once whether kernel TLS can carry sends: OpenSSL built with kTLS
 * and the kernel's `tls` ULP present. why gets a short reason either way.
 */
bool kb_tls_ktls_probe(char *why, size_t cap);

/* Builds listener l's context; ktls asks OpenSSL to hand records to the
 * kernel when it can. */
kp_err kb_tls_ctx_new(const kb_config *cfg, const kb_listener *l, bool ktls, kb_tls_ctx **out,
                      char *err, size_t errlen);
void kb_tls_ctx_free(kb_tls_ctx *ctx);

/* A server-side session on a connected non-blocking socket; NULL on OOM. */
kb_tls *kb_tls_new(kb_tls_ctx *ctx, int fd);
/* Sends close_notify if the session was up (best effort), then frees. */
void kb_tls_free(kb_tls *t);

/* KB_TLS_DONE once the handshake completed; else a WANT or an error. */
int kb_tls_handshake(kb_tls *t);
ssize_t kb_tls_read(kb_tls *t, void *buf, size_t len);
ssize_t kb_tls_write(kb_tls *t, const void *buf, size_t len);
ssize_t kb_tls_sendfile(kb_tls *t, int fd, off_t off, size_t len);

/* Decrypted bytes OpenSSL holds that the socket will not signal again. */
size_t kb_tls_pending(const kb_tls *t);
/* True when the kernel encrypts this connection's sends (kTLS). */
bool kb_tls_ktls_send(kb_tls *t);
/* "User:<subject in RFC 2253 form>" for a verified client certificate,
 * else "User:ANONYMOUS", as Kafka's default principal builder. */
void kb_tls_principal(const kb_tls *t, char *buf, size_t cap);
/* Protocol and cipher, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384". */
void kb_tls_describe(const kb_tls *t, char *buf, size_t cap);
/* Why the last call failed (OpenSSL's reason or errno), "" if unknown. */
const char *kb_tls_why(const kb_tls *t);

#endif
