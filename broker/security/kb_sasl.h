/*
 * kb_sasl: SASL on SASL_PLAINTEXT and SASL_SSL listeners: what each listener
 * accepts, the gate in front of authentication, and one exchange per
 * connection (PLAIN here, SCRAM in kb_scram).
 *
 * Job: read a listener's SASL keys once (sasl.enabled.mechanisms, the PLAIN
 * users of its JAAS config, sasl.server.max.receive.size); say which
 * requests and frame sizes a connection may send in each phase; run the
 * mechanism the client picked.
 *
 * Keys (listener.name.<listener>.<key> overrides the bare key):
 *   sasl.enabled.mechanisms       default: SCRAM-SHA-256, SCRAM-SHA-512, and
 *                                 PLAIN when PLAIN users are configured.
 *                                 GSSAPI and OAUTHBEARER are reported and
 *                                 skipped.
 *   plain.sasl.jaas.config        (listener-prefixed) else sasl.jaas.config:
 *                                 Kafka's PlainLoginModule entry, users as
 *                                 user_<name>="<password>".
 *   sasl.server.max.receive.size  frame cap before authentication (524288).
 *
 * Phases of a connection on a SASL listener, as Kafka's authenticator:
 *   START  ApiVersions, SaslHandshake
 *   AUTH   after SaslHandshake v1: SaslAuthenticate only
 *   RAW    after SaslHandshake v0: raw SASL tokens framed by an int32
 *          length, without Kafka headers, answered the same way
 *   DONE   authenticated: every API
 * Any other request closes the connection.
 *
 * PLAIN message (RFC 4616): [authzid] NUL authcid NUL password, exactly two
 * NULs; the user name and password must not be empty; a non-empty authzid
 * must equal the user name.
 *
 * Invariants:
 *   1. Before DONE, no frame larger than the listener's max receive size is
 *      accepted (kb_sasl_frame_limit).
 *   2. A session fails at most once and then stays failed.
 *   3. Passwords are compared in constant time (digests, CRYPTO_memcmp).
 *
 * Ownership: a kb_sasl_listener belongs to the server; a kb_sasl_session to
 * its connection. Token and user strings a session returns stay valid until
 * its next step or its free. PLAIN results point into the parsed message.
 *
 * Threading: loop thread only.
 *
 * Errors: kb_sasl_listener_new returns KP_ERR__INVAL with one line in err
 * naming the key; kb_sasl_plain_parse returns KP_ERR__MALFORMED with a
 * Kafka-worded reason; a failed step returns KB_AUTH_FAILURE with
 * kb_sasl_session_why() set.
 */
#ifndef KB_SASL_H
#define KB_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kb_config.h"
#include "kb_scram.h"
#include "kp_err.h"

#define KB_SASL_MAX_RECEIVE_DEFAULT 524288

typedef enum kb_sasl_phase {
    KB_SASL_OFF = 0, /* not a SASL listener */
    KB_SASL_START,
    KB_SASL_AUTH,
    KB_SASL_RAW,
    KB_SASL_DONE,
} kb_sasl_phase;

/* Mechanism bits. */
enum {
    KB_MECH_PLAIN = 1u << 0,
    KB_MECH_SCRAM_SHA_256 = 1u << 1,
    KB_MECH_SCRAM_SHA_512 = 1u << 2,
};

typedef struct kb_sasl_user {
    char *su_name;
    char *su_password;
} kb_sasl_user;

typedef struct kb_sasl_listener {
    unsigned sl_mechs;        /* KB_MECH_* bits enabled */
    int32_t sl_max_receive;   /* frame cap before authentication */
    size_t sl_nusers;         /* PLAIN users */
    kb_sasl_user *sl_users;
} kb_sasl_listener;

typedef struct kb_sasl_plain {
    const char *sp_authzid;
    size_t sp_authzid_len;
    const char *sp_user;
    size_t sp_user_len;
    const char *sp_password;
    size_t sp_password_len;
    const char *sp_why; /* set when parsing fails */
} kb_sasl_plain;

typedef struct kb_sasl_session kb_sasl_session;

kp_err kb_sasl_listener_new(const kb_config *cfg, const kb_listener *l, kb_sasl_listener **out,
                            char *err, size_t errlen);
void kb_sasl_listener_free(kb_sasl_listener *sl);

/* KB_MECH_* for a mechanism name (exact, upper case), 0 if unknown. */
unsigned kb_sasl_mech_from_name(const char *p, size_t len);
/* "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512". */
const char *kb_sasl_mech_name(unsigned mech);

/* May a connection in this phase send this API key? */
bool kb_sasl_allows(kb_sasl_phase phase, int16_t api_key);
/* The largest frame accepted now: the listener's max receive size before
 * authentication, request_max otherwise. */
int32_t kb_sasl_frame_limit(const kb_sasl_listener *sl, kb_sasl_phase phase, int32_t request_max);

/* Splits a PLAIN message; checks every form listed above. */
kp_err kb_sasl_plain_parse(const uint8_t *p, size_t len, kb_sasl_plain *out);
/* The user_<name>="<password>" options of a PlainLoginModule JAAS entry
 * (none for another module). Caller frees with kb_sasl_users_free. */
kp_err kb_sasl_jaas_users(const char *jaas, kb_sasl_user **users, size_t *n, char *err,
                          size_t errlen);
void kb_sasl_users_free(kb_sasl_user *users, size_t n);

/* A new exchange for one enabled mechanism; NULL on out of memory. */
kb_sasl_session *kb_sasl_session_new(unsigned mech, const kb_sasl_listener *sl,
                                     const kb_scram_store *store);
void kb_sasl_session_free(kb_sasl_session *s);
kb_auth_step kb_sasl_session_step(kb_sasl_session *s, const uint8_t *in, size_t len,
                                  const uint8_t **out, size_t *out_len);
unsigned kb_sasl_session_mech(const kb_sasl_session *s);
/* The authenticated (or claimed) user name; "" before one was read. */
const char *kb_sasl_session_user(const kb_sasl_session *s);
const char *kb_sasl_session_why(const kb_sasl_session *s);

#endif
