/*
 * kb_scram: the server side of SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802,
 * RFC 7677), and the credential arithmetic they rest on.
 *
 * Job: turn a salted password into what the broker keeps (StoredKey,
 * ServerKey, salt, iterations; never the password), and run one exchange:
 * client-first -> server-first, client-final -> server-final.
 *
 * The exchange, as checked here:
 *   client-first  gs2-header ("n,," "y,," or with "a=<authzid>,")
 *                 then "n=<saslname>,r=<client nonce>[,ext...]".
 *                 Channel binding ("p=") and mandatory extensions ("m=") are
 *                 refused; a non-empty authzid must equal the user name;
 *                 "=2C" and "=3D" decode to ',' and '=', any other '=' is
 *                 malformed; tokenauth (delegation tokens) is refused.
 *   server-first  "r=<client nonce><server nonce>,s=<salt>,i=<iterations>".
 *   client-final  "c=<base64 gs2-header>,r=<nonce>,...,p=<proof>": c must
 *                 be the gs2 header exactly, r the combined nonce exactly,
 *                 and H(proof XOR HMAC(StoredKey, AuthMessage)) must equal
 *                 StoredKey (compared with CRYPTO_memcmp).
 *   server-final  "v=<base64 HMAC(ServerKey, AuthMessage)>".
 * An unknown user fails at client-first, as in Kafka.
 *
 * Invariants:
 *   1. A credential has KB_SCRAM_MIN_ITERATIONS..KB_SCRAM_MAX_ITERATIONS
 *      iterations, a 0..KB_SCRAM_SALT_MAX byte salt and keys of the
 *      mechanism's hash length.
 *   2. Each exchange allocates at most a small multiple of its input, which
 *      the caller bounds (sasl.server.max.receive.size).
 *   3. After a failure the exchange stays failed.
 *
 * Ownership: a kb_scram is its caller's (kb_scram_free). The store passed
 * to kb_scram_new is borrowed for the exchange's life. Output tokens and
 * the user name belong to the exchange and stay valid until the next step
 * or kb_scram_free.
 *
 * Threading: any thread, one exchange at a time per object.
 *
 * Errors: kb_scram_cred_* return KP_ERR__INVAL for values out of range;
 * kb_scram_step reports KB_AUTH_FAILURE with kb_scram_why() set to the
 * message Kafka clients are shown.
 */
#ifndef KB_SCRAM_H
#define KB_SCRAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kp_err.h"

#define KB_SCRAM_MIN_ITERATIONS 4096
#define KB_SCRAM_MAX_ITERATIONS 16384
#define KB_SCRAM_HASH_MAX 64
#define KB_SCRAM_SALT_MAX 128
#define KB_SCRAM_USER_MAX 255 /* bytes of a user name */

/* Kafka's ScramMechanism numbers, as on the wire. */
typedef enum kb_scram_mech {
    KB_SCRAM_UNKNOWN = 0,
    KB_SCRAM_SHA_256 = 1,
    KB_SCRAM_SHA_512 = 2,
} kb_scram_mech;

typedef enum kb_auth_step {
    KB_AUTH_CONTINUE = 0, /* send the token and wait for the next one */
    KB_AUTH_SUCCESS,      /* send the token; the user is authenticated */
    KB_AUTH_FAILURE,      /* refuse: kb_*_why() says why */
} kb_auth_step;

typedef struct kb_scram_cred {
    kb_scram_mech sc_mech;
    int32_t sc_iterations;
    size_t sc_salt_len;
    uint8_t sc_salt[KB_SCRAM_SALT_MAX];
    uint8_t sc_stored_key[KB_SCRAM_HASH_MAX];
    uint8_t sc_server_key[KB_SCRAM_HASH_MAX];
} kb_scram_cred;

typedef struct kb_scram_store kb_scram_store;
typedef struct kb_scram kb_scram;

/* "SCRAM-SHA-256" / "SCRAM-SHA-512" / "UNKNOWN". */
const char *kb_scram_mech_name(kb_scram_mech m);
/* 32 or 64; 0 for an unknown mechanism. */
size_t kb_scram_hash_len(kb_scram_mech m);

/* From SaltedPassword = Hi(password, salt, i), as AlterUserScramCredentials
 * carries it: of any length (it is an HMAC key), as Kafka's controller takes
 * it, and a salt of 0..KB_SCRAM_SALT_MAX bytes. */
kp_err kb_scram_cred_from_salted(kb_scram_mech m, const uint8_t *salted, size_t salted_len,
                                 const uint8_t *salt, size_t salt_len, int32_t iterations,
                                 kb_scram_cred *out);
/* From a password (PBKDF2 here; for tests and tools, not the loop). */
kp_err kb_scram_cred_from_password(kb_scram_mech m, const char *password, const uint8_t *salt,
                                   size_t salt_len, int32_t iterations, kb_scram_cred *out);

/* A new exchange; NULL on out of memory or an unknown mechanism. */
kb_scram *kb_scram_new(kb_scram_mech m, const kb_scram_store *store);
void kb_scram_free(kb_scram *s);
/* Fixes the server nonce (printable, no ','), for test vectors only. */
void kb_scram_set_server_nonce(kb_scram *s, const char *nonce);
kb_auth_step kb_scram_step(kb_scram *s, const uint8_t *in, size_t len, const uint8_t **out,
                           size_t *out_len);
/* The decoded user name once client-first parsed, else "". */
const char *kb_scram_user(const kb_scram *s);
const char *kb_scram_why(const kb_scram *s);

/* Base64 (RFC 4648, padded). encode writes a NUL; cap >= 4*ceil(n/3)+1.
 * decode refuses anything but whole padded groups; false if it won't fit. */
size_t kb_b64_encode(char *out, size_t cap, const uint8_t *in, size_t n);
bool kb_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap, size_t *out_len);

#endif
