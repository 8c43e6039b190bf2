/*
 * kb_scram_store: the broker's SCRAM credentials, by user and mechanism,
 * kept salted and hashed (never a password) and persisted.
 *
 * Job: hold what AlterUserScramCredentials sets, answer the lookups of
 * SCRAM exchanges and DescribeUserScramCredentials, and write the whole set
 * atomically after each change.
 *
 * On disk: <first log dir>/runnel-scram-credentials, text, one credential
 * per line, fields separated by one space:
 *
 *   field        meaning
 *   "v1"         format version
 *   mechanism    SCRAM-SHA-256 | SCRAM-SHA-512
 *   user         the user name, base64 (names may hold spaces)
 *   iterations   4096..16384
 *   salt         base64, or "-" for an empty salt
 *   stored key   base64, the mechanism's hash length
 *   server key   base64, the mechanism's hash length
 *
 * Written to a temporary file, fsynced, renamed over the old one, and the
 * directory fsynced: a crash leaves the old set or the new one.
 *
 * Invariants:
 *   1. At most one credential per (user, mechanism); at most
 *      KB_SCRAM_STORE_MAX credentials.
 *   2. Entries are sorted by user name, then mechanism.
 *   3. Every stored credential satisfies kb_scram.h's invariant 1.
 *
 * Ownership: the store owns its entries; a returned credential or name is
 * valid until the next put, delete or free.
 *
 * Threading: loop thread only. kb_scram_store_save() does file I/O with an
 * fsync on the calling thread: it runs only for an admin request.
 *
 * Errors: open returns KP_ERR__IO / KP_ERR__CORRUPT with file:line in err;
 * put returns KP_ERR__NOMEM or KP_ERR__INVAL (store full); delete returns
 * KP_ERR_RESOURCE_NOT_FOUND; save returns KP_ERR__IO.
 */
#ifndef KB_SCRAM_STORE_H
#define KB_SCRAM_STORE_H

#include <stddef.h>

#include "kb_scram.h"

#define KB_SCRAM_STORE_MAX 65536
#define KB_SCRAM_STORE_FILE "runnel-scram-credentials"

/* Loads dir's file (missing = empty); dir NULL keeps the store in memory. */
kp_err kb_scram_store_open(const char *dir, kb_scram_store **out, char *err, size_t errlen);
void kb_scram_store_free(kb_scram_store *st);

const kb_scram_cred *kb_scram_store_find(const kb_scram_store *st, const char *user, size_t ulen,
                                         kb_scram_mech m);
/* Inserts or replaces user's credential for cred->sc_mech. */
kp_err kb_scram_store_put(kb_scram_store *st, const char *user, size_t ulen,
                          const kb_scram_cred *cred);
kp_err kb_scram_store_delete(kb_scram_store *st, const char *user, size_t ulen, kb_scram_mech m);
/* Writes the file (a no-op for a memory-only store). */
kp_err kb_scram_store_save(const kb_scram_store *st);

size_t kb_scram_store_count(const kb_scram_store *st);
/* The i-th credential in order; its user name in *user. */
const kb_scram_cred *kb_scram_store_at(const kb_scram_store *st, size_t i, const char **user);

#endif
