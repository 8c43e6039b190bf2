/* SASL: SCRAM against the RFC 7677 vector and a SHA-512 exchange computed
 * here with OpenSSL directly, every malformed SCRAM and PLAIN form, JAAS
 * parsing, the pre-authentication gate and frame cap, and the credential
 * store with its file. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "broker_suites.h"
#include "kb_sasl.h"
#include "kb_scram.h"
#include "kb_scram_store.h"
#include "kp_msg.h"

/* ---- helpers ------------------------------------------------------------- */

#define RFC_CNONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_SNONCE "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
#define RFC_SALT "W22ZaJ0SNY7soEsUEjb6gQ=="

static kb_scram_store *store_with(const char *user, const char *pw, kb_scram_mech m)
{
    kb_scram_store *st = NULL;
    char err[128];
    ck_assert_int_eq(kb_scram_store_open(NULL, &st, err, sizeof err), KP_ERR_NONE);
    uint8_t salt[18];
    size_t salt_len = 0;
    ck_assert(kb_b64_decode(RFC_SALT, strlen(RFC_SALT), salt, sizeof salt, &salt_len));
    ck_assert_uint_eq(salt_len, 16);
    kb_scram_cred c;
    ck_assert_int_eq(kb_scram_cred_from_password(m, pw, salt, 16, 4096, &c), KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, user, strlen(user), &c), KP_ERR_NONE);
    return st;
}

static kb_auth_step step_str(kb_scram *s, const char *msg, char *out, size_t cap)
{
    const uint8_t *o = NULL;
    size_t n = 0;
    kb_auth_step r = kb_scram_step(s, (const uint8_t *)msg, strlen(msg), &o, &n);
    ck_assert_uint_lt(n, cap);
    if (n > 0)
        memcpy(out, o, n);
    out[n] = '\0';
    return r;
}

/* A SCRAM exchange at the RFC 7677 vector's server-first point. */
static kb_scram *rfc_at_final(kb_scram_store **st)
{
    *st = store_with("user", "pencil", KB_SCRAM_SHA_256);
    kb_scram *s = kb_scram_new(KB_SCRAM_SHA_256, *st);
    kb_scram_set_server_nonce(s, RFC_SNONCE);
    char out[256];
    ck_assert_int_eq(step_str(s, "n,,n=user,r=" RFC_CNONCE, out, sizeof out), KB_AUTH_CONTINUE);
    return s;
}

/* ---- SCRAM ------------------------------------------------------------------ */

START_TEST(test_scram_rfc7677_vector)
{
    kb_scram_store *st = store_with("user", "pencil", KB_SCRAM_SHA_256);
    kb_scram *s = kb_scram_new(KB_SCRAM_SHA_256, st);
    kb_scram_set_server_nonce(s, RFC_SNONCE);
    char out[256];
    ck_assert_int_eq(step_str(s, "n,,n=user,r=" RFC_CNONCE, out, sizeof out), KB_AUTH_CONTINUE);
    ck_assert_str_eq(out, "r=" RFC_CNONCE RFC_SNONCE ",s=" RFC_SALT ",i=4096");
    ck_assert_str_eq(kb_scram_user(s), "user");
    ck_assert_int_eq(step_str(s,
                              "c=biws,r=" RFC_CNONCE RFC_SNONCE
                              ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                              out, sizeof out),
                     KB_AUTH_SUCCESS);
    ck_assert_str_eq(out, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    /* nothing more is accepted */
    ck_assert_int_eq(step_str(s, "c=biws", out, sizeof out), KB_AUTH_FAILURE);
    kb_scram_free(s);
    kb_scram_store_free(st);
}
END_TEST

/* The client side, written here from RFC 5802 with OpenSSL primitives. */
static void client_proof(const EVP_MD *md, const char *pw, const uint8_t *salt, size_t salt_len,
                         int iter, const char *am, char *proof_b64, char *server_sig_b64)
{
    size_t h = (size_t)EVP_MD_get_size(md);
    uint8_t salted[64], ck[64], sk[64], csig[64], srvk[64], ssig[64], proof[64];
    unsigned int l = 0;
    ck_assert(PKCS5_PBKDF2_HMAC(pw, (int)strlen(pw), salt, (int)salt_len, iter, md, (int)h,
                                salted));
    HMAC(md, salted, (int)h, (const uint8_t *)"Client Key", 10, ck, &l);
    EVP_Digest(ck, h, sk, &l, md, NULL);
    HMAC(md, sk, (int)h, (const uint8_t *)am, strlen(am), csig, &l);
    for (size_t i = 0; i < h; i++)
        proof[i] = ck[i] ^ csig[i];
    HMAC(md, salted, (int)h, (const uint8_t *)"Server Key", 10, srvk, &l);
    HMAC(md, srvk, (int)h, (const uint8_t *)am, strlen(am), ssig, &l);
    EVP_EncodeBlock((uint8_t *)proof_b64, proof, (int)h);
    EVP_EncodeBlock((uint8_t *)server_sig_b64, ssig, (int)h);
}

START_TEST(test_scram_sha512_exchange)
{
    kb_scram_store *st = NULL;
    char err[128];
    ck_assert_int_eq(kb_scram_store_open(NULL, &st, err, sizeof err), KP_ERR_NONE);
    const uint8_t salt[] = "0123456789abcdef0123";
    kb_scram_cred c;
    ck_assert_int_eq(kb_scram_cred_from_password(KB_SCRAM_SHA_512, "s3cr=t,pw", salt, 20, 8192, &c),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, "al,i=ce", 7, &c), KP_ERR_NONE);
    kb_scram *s = kb_scram_new(KB_SCRAM_SHA_512, st);
    char sf[512], cf[1024], am[2048], proof[100], ssig[100], out[512];
    /* the user name is escaped (=2C for ',', =3D for '='), authzid given */
    const char *bare = "n=al=2Ci=3Dce,r=clientNONCE123";
    snprintf(cf, sizeof cf, "n,a=al=2Ci=3Dce,%s", bare);
    ck_assert_int_eq(step_str(s, cf, sf, sizeof sf), KB_AUTH_CONTINUE);
    ck_assert_str_eq(kb_scram_user(s), "al,i=ce");
    ck_assert(strncmp(sf, "r=clientNONCE123", 16) == 0);
    ck_assert(strstr(sf, ",i=8192") != NULL);
    const char *nonce_end = strchr(sf, ',');
    char without[512], gs2_b64[64];
    EVP_EncodeBlock((uint8_t *)gs2_b64, (const uint8_t *)"n,a=al=2Ci=3Dce,", 16);
    snprintf(without, sizeof without, "c=%s,r=%.*s", gs2_b64, (int)(nonce_end - sf - 2), sf + 2);
    snprintf(am, sizeof am, "%s,%s,%s", bare, sf, without);
    client_proof(EVP_sha512(), "s3cr=t,pw", salt, 20, 8192, am, proof, ssig);
    snprintf(cf, sizeof cf, "%s,p=%s", without, proof);
    ck_assert_int_eq(step_str(s, cf, out, sizeof out), KB_AUTH_SUCCESS);
    ck_assert(strncmp(out, "v=", 2) == 0);
    ck_assert_str_eq(out + 2, ssig);
    kb_scram_free(s);
    kb_scram_store_free(st);
}
END_TEST

/* Each client-final variant of the RFC exchange that must fail. */
START_TEST(test_scram_final_refusals)
{
    static const char *const bad[] = {
        /* wrong proof (last byte changed) */
        "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVE=",
        /* nonce: a prefix, a longer one, a different one */
        "c=biws,r=" RFC_CNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "c=biws,r=" RFC_CNONCE RFC_SNONCE "x,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "c=biws,r=X" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        /* channel binding: "y,," instead of the "n,," sent */
        "c=eSws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        /* proof missing, short, not base64; c missing */
        "c=biws,r=" RFC_CNONCE RFC_SNONCE,
        "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapW",
        "c=biws,r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndV!=",
        "r=" RFC_CNONCE RFC_SNONCE ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_scram_store *st;
        kb_scram *s = rfc_at_final(&st);
        char out[256];
        ck_assert_msg(step_str(s, bad[i], out, sizeof out) == KB_AUTH_FAILURE, "case %zu", i);
        ck_assert_str_eq(out, "");
        ck_assert(kb_scram_why(s)[0] != '\0');
        /* failed stays failed, even with the right message */
        ck_assert_int_eq(step_str(s,
                                  "c=biws,r=" RFC_CNONCE RFC_SNONCE
                                  ",p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
                                  out, sizeof out),
                         KB_AUTH_FAILURE);
        kb_scram_free(s);
        kb_scram_store_free(st);
    }
}
END_TEST

START_TEST(test_scram_first_refusals)
{
    static const char *const bad[] = {
        "n,,n=nobody,r=abc",          /* unknown user */
        "n,a=other,n=user,r=abc",     /* authzid is not the user */
        "p=tls-unique,,n=user,r=abc", /* channel binding */
        "n,,m=ext,n=user,r=abc",      /* mandatory extension */
        "n,,n=user,r=abc,tokenauth=true", /* delegation token */
        "n,,n=user,r=",               /* empty nonce */
        "n,,n=user",                  /* no nonce */
        "n,,n=,r=abc",                /* empty user */
        "n,,n=us=2Xer,r=abc",         /* bad escape */
        "n,,n=user=,r=abc",           /* truncated escape */
        "x,,n=user,r=abc",            /* bad gs2 flag */
        "n,,",                        /* no bare message */
        "n",                          /* nothing */
        "n,,n=user,r=a\tb",           /* control character */
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_scram_store *st = store_with("user", "pencil", KB_SCRAM_SHA_256);
        kb_scram *s = kb_scram_new(KB_SCRAM_SHA_256, st);
        char out[256];
        ck_assert_msg(step_str(s, bad[i], out, sizeof out) == KB_AUTH_FAILURE, "case %zu", i);
        kb_scram_free(s);
        kb_scram_store_free(st);
    }
    /* an authzid equal to the user, and the other mechanism's store miss */
    kb_scram_store *st = store_with("user", "pencil", KB_SCRAM_SHA_256);
    kb_scram *s = kb_scram_new(KB_SCRAM_SHA_256, st);
    char out[256];
    ck_assert_int_eq(step_str(s, "n,a=user,n=user,r=abc", out, sizeof out), KB_AUTH_CONTINUE);
    kb_scram_free(s);
    s = kb_scram_new(KB_SCRAM_SHA_512, st);
    ck_assert_int_eq(step_str(s, "n,,n=user,r=abc", out, sizeof out), KB_AUTH_FAILURE);
    kb_scram_free(s);
    kb_scram_store_free(st);
}
END_TEST

START_TEST(test_scram_credential_limits)
{
    static const struct {
        kb_scram_mech m;
        size_t salted_len, salt_len;
        int32_t iterations;
        kp_err want;
    } cases[] = {
        {KB_SCRAM_SHA_256, 32, 8, 4095, KP_ERR__INVAL},  /* too few iterations */
        {KB_SCRAM_SHA_256, 32, 8, 16385, KP_ERR__INVAL}, /* too many */
        {KB_SCRAM_SHA_256, 64, 8, 4096, KP_ERR_NONE},    /* any length, as Kafka */
        {KB_SCRAM_SHA_256, 5, 8, 4096, KP_ERR_NONE},
        {KB_SCRAM_SHA_256, 0, 8, 4096, KP_ERR_NONE},
        {KB_SCRAM_SHA_512, 64, 0, 4096, KP_ERR_NONE},    /* no salt, as Kafka */
        {KB_SCRAM_SHA_512, 64, KB_SCRAM_SALT_MAX + 1, 4096, KP_ERR__INVAL}, /* too long to keep */
        {KB_SCRAM_UNKNOWN, 32, 8, 4096, KP_ERR__INVAL},
        {KB_SCRAM_SHA_512, 64, 8, 16384, KP_ERR_NONE},
        {KB_SCRAM_SHA_256, 32, KB_SCRAM_SALT_MAX, 4096, KP_ERR_NONE},
    };
    uint8_t salted[64] = {0}, salt[KB_SCRAM_SALT_MAX + 1] = {1};
    kb_scram_cred c;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(kb_scram_cred_from_salted(cases[i].m, salted, cases[i].salted_len, salt,
                                                cases[i].salt_len, cases[i].iterations,
                                                &c) == cases[i].want,
                      "case %zu", i);
}
END_TEST

START_TEST(test_base64_decode_strict)
{
    uint8_t out[16];
    size_t n = 0;
    ck_assert(kb_b64_decode("YWJj", 4, out, sizeof out, &n) && n == 3);
    ck_assert(kb_b64_decode("YWI=", 4, out, sizeof out, &n) && n == 2);
    ck_assert(kb_b64_decode("YQ==", 4, out, sizeof out, &n) && n == 1);
    ck_assert(!kb_b64_decode("YQ=", 3, out, sizeof out, &n));
    ck_assert(!kb_b64_decode("Y=Q=", 4, out, sizeof out, &n));
    ck_assert(!kb_b64_decode("YW J", 4, out, sizeof out, &n));
    ck_assert(!kb_b64_decode("YWJjYWJjYWJjYWJjYWJjYWJj", 24, out, sizeof out, &n));
}
END_TEST

/* ---- PLAIN and JAAS ------------------------------------------------------------ */

static kp_err plain(const char *msg, size_t len, kb_sasl_plain *p)
{
    return kb_sasl_plain_parse((const uint8_t *)msg, len, p);
}

START_TEST(test_plain_parse)
{
    kb_sasl_plain p;
    ck_assert_int_eq(plain("\0alice\0pw", 9, &p), KP_ERR_NONE);
    ck_assert_uint_eq(p.sp_authzid_len, 0);
    ck_assert_uint_eq(p.sp_user_len, 5);
    ck_assert(memcmp(p.sp_password, "pw", 2) == 0 && p.sp_password_len == 2);
    ck_assert_int_eq(plain("alice\0alice\0pw", 14, &p), KP_ERR_NONE);
    static const struct {
        const char *m;
        size_t n;
    } bad[] = {
        {"", 0},                   /* empty */
        {"alicepw", 7},            /* no NUL */
        {"alice\0pw", 8},          /* one NUL */
        {"\0alice\0pw\0", 10},     /* three NULs (trailing) */
        {"\0al\0ice\0pw", 10},     /* three NULs (inside) */
        {"\0\0pw", 4},             /* empty user */
        {"\0alice\0", 7},          /* empty password */
        {"\0\0", 2},               /* both empty */
        {"bob\0alice\0pw", 12},    /* authzid is someone else */
        {"alic\0alice\0pw", 13},   /* authzid a prefix of the user */
        {"alicex\0alice\0pw", 15}, /* authzid longer than the user */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(plain(bad[i].m, bad[i].n, &p) == KP_ERR__MALFORMED, "case %zu", i);
        ck_assert(p.sp_why != NULL);
    }
}
END_TEST

START_TEST(test_jaas_users)
{
    kb_sasl_user *u;
    size_t n;
    char err[160];
    ck_assert_int_eq(kb_sasl_jaas_users(
                         "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
                         "  username=\"admin\" password=\"admin-secret\"\n"
                         "  user_admin=\"admin-secret\" user_alice=\"a \\\"quoted\\\" pw\" "
                         "user_bob=plain;",
                         &u, &n, err, sizeof err),
                     KP_ERR_NONE);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(u[0].su_name, "admin");
    ck_assert_str_eq(u[1].su_password, "a \"quoted\" pw");
    ck_assert_str_eq(u[2].su_password, "plain");
    kb_sasl_users_free(u, n);
    /* another module lists no PLAIN users */
    ck_assert_int_eq(kb_sasl_jaas_users("org.apache.kafka.common.security.scram.ScramLoginModule "
                                        "required user_x=\"y\";",
                                        &u, &n, err, sizeof err),
                     KP_ERR_NONE);
    ck_assert_uint_eq(n, 0);
    static const char *const bad[] = {
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\"",
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b; x",
        "org.apache.kafka.common.security.plain.PlainLoginModule maybe user_a=\"b\";",
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_a \"b\";",
        "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\"; extra",
        "",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(kb_sasl_jaas_users(bad[i], &u, &n, err, sizeof err) == KP_ERR__INVAL,
                      "case %zu", i);
}
END_TEST

START_TEST(test_plain_session)
{
    kb_sasl_user users[] = {{"alice", "alice-pw"}, {"bob", "b"}};
    kb_sasl_listener sl = {KB_MECH_PLAIN, KB_SASL_MAX_RECEIVE_DEFAULT, 2, users};
    static const struct {
        const char *m;
        size_t n;
        kb_auth_step want;
    } cases[] = {
        {"\0alice\0alice-pw", 15, KB_AUTH_SUCCESS},
        {"alice\0alice\0alice-pw", 20, KB_AUTH_SUCCESS},
        {"\0alice\0alice-p", 14, KB_AUTH_FAILURE},
        {"\0alice\0alice-pwx", 16, KB_AUTH_FAILURE},
        {"\0carol\0alice-pw", 15, KB_AUTH_FAILURE},
        {"\0bob\0alice-pw", 13, KB_AUTH_FAILURE},
        {"\0alice\0", 7, KB_AUTH_FAILURE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kb_sasl_session *s = kb_sasl_session_new(KB_MECH_PLAIN, &sl, NULL);
        const uint8_t *out;
        size_t out_len;
        kb_auth_step r = kb_sasl_session_step(s, (const uint8_t *)cases[i].m, cases[i].n, &out,
                                              &out_len);
        ck_assert_msg(r == cases[i].want, "case %zu", i);
        ck_assert_uint_eq(out_len, 0);
        if (r == KB_AUTH_SUCCESS)
            ck_assert_str_eq(kb_sasl_session_user(s), "alice");
        else
            ck_assert(kb_sasl_session_why(s)[0] != '\0');
        /* one message per session */
        ck_assert_int_eq(kb_sasl_session_step(s, (const uint8_t *)cases[0].m, cases[0].n, &out,
                                              &out_len),
                         KB_AUTH_FAILURE);
        kb_sasl_session_free(s);
    }
}
END_TEST

/* ---- the pre-authentication gate -------------------------------------------------- */

START_TEST(test_preauth_gate)
{
    ck_assert(kb_sasl_allows(KB_SASL_START, KP_API_API_VERSIONS));
    ck_assert(kb_sasl_allows(KB_SASL_START, KP_API_SASL_HANDSHAKE));
    ck_assert(!kb_sasl_allows(KB_SASL_START, KP_API_SASL_AUTHENTICATE));
    ck_assert(!kb_sasl_allows(KB_SASL_START, KP_API_METADATA));
    ck_assert(!kb_sasl_allows(KB_SASL_START, KP_API_PRODUCE));
    ck_assert(kb_sasl_allows(KB_SASL_AUTH, KP_API_SASL_AUTHENTICATE));
    ck_assert(!kb_sasl_allows(KB_SASL_AUTH, KP_API_API_VERSIONS));
    ck_assert(!kb_sasl_allows(KB_SASL_AUTH, KP_API_SASL_HANDSHAKE));
    ck_assert(!kb_sasl_allows(KB_SASL_AUTH, KP_API_FETCH));
    ck_assert(!kb_sasl_allows(KB_SASL_RAW, KP_API_SASL_AUTHENTICATE));
    ck_assert(kb_sasl_allows(KB_SASL_DONE, KP_API_FETCH));
    ck_assert(kb_sasl_allows(KB_SASL_OFF, KP_API_PRODUCE));
    kb_sasl_listener sl = {KB_MECH_SCRAM_SHA_256, 524288, 0, NULL};
    int32_t req_max = 104857600;
    ck_assert_int_eq(kb_sasl_frame_limit(&sl, KB_SASL_START, req_max), 524288);
    ck_assert_int_eq(kb_sasl_frame_limit(&sl, KB_SASL_AUTH, req_max), 524288);
    ck_assert_int_eq(kb_sasl_frame_limit(&sl, KB_SASL_RAW, req_max), 524288);
    ck_assert_int_eq(kb_sasl_frame_limit(&sl, KB_SASL_DONE, req_max), req_max);
    ck_assert_int_eq(kb_sasl_frame_limit(NULL, KB_SASL_OFF, req_max), req_max);
    ck_assert_int_eq(kb_sasl_frame_limit(&sl, KB_SASL_START, 1000), 1000);
}
END_TEST

/* ---- the credential store ----------------------------------------------------------- */

START_TEST(test_store_persists)
{
    char dir[] = "/tmp/runnel-scram-XXXXXX", err[256], path[256];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    kb_scram_store *st;
    ck_assert_int_eq(kb_scram_store_open(dir, &st, err, sizeof err), KP_ERR_NONE);
    uint8_t salt[4] = {9, 8, 7, 6};
    kb_scram_cred a, b;
    kb_scram_cred_from_password(KB_SCRAM_SHA_256, "pw1", salt, 4, 4096, &a);
    kb_scram_cred_from_password(KB_SCRAM_SHA_512, "pw2", salt, 4, 5000, &b);
    ck_assert_int_eq(kb_scram_store_put(st, "a user", 6, &a), KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, "a user", 6, &b), KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, "0", 1, &b), KP_ERR_NONE);
    kb_scram_cred unsalted; /* an empty salt, as AlterUserScramCredentials may give */
    uint8_t salted[32] = {3};
    ck_assert_int_eq(kb_scram_cred_from_salted(KB_SCRAM_SHA_256, salted, sizeof salted, NULL, 0,
                                               4096, &unsalted),
                     KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_put(st, "nosalt", 6, &unsalted), KP_ERR_NONE);
    ck_assert_int_eq(kb_scram_store_delete(st, "zz", 2, KB_SCRAM_SHA_256),
                     KP_ERR_RESOURCE_NOT_FOUND);
    ck_assert_int_eq(kb_scram_store_save(st), KP_ERR_NONE);
    kb_scram_store_free(st);
    ck_assert_int_eq(kb_scram_store_open(dir, &st, err, sizeof err), KP_ERR_NONE);
    ck_assert_uint_eq(kb_scram_store_count(st), 4);
    const kb_scram_cred *u = kb_scram_store_find(st, "nosalt", 6, KB_SCRAM_SHA_256);
    ck_assert_ptr_nonnull(u);
    ck_assert_uint_eq(u->sc_salt_len, 0);
    ck_assert(memcmp(u->sc_stored_key, unsalted.sc_stored_key, 32) == 0);
    const char *user;
    kb_scram_store_at(st, 0, &user);
    ck_assert_str_eq(user, "0");
    const kb_scram_cred *c = kb_scram_store_find(st, "a user", 6, KB_SCRAM_SHA_512);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(c->sc_iterations, 5000);
    ck_assert(memcmp(c->sc_stored_key, b.sc_stored_key, 64) == 0);
    ck_assert_int_eq(kb_scram_store_delete(st, "a user", 6, KB_SCRAM_SHA_256), KP_ERR_NONE);
    ck_assert_ptr_null(kb_scram_store_find(st, "a user", 6, KB_SCRAM_SHA_256));
    kb_scram_store_free(st);
    /* a damaged file is reported, not silently dropped */
    snprintf(path, sizeof path, "%s/%s", dir, KB_SCRAM_STORE_FILE);
    FILE *f = fopen(path, "a");
    fputs("v1 SCRAM-SHA-256 eA== 10 AA== AA== AA==\n", f);
    fclose(f);
    ck_assert_int_eq(kb_scram_store_open(dir, &st, err, sizeof err), KP_ERR__CORRUPT);
    ck_assert(strstr(err, ":5:") != NULL);
    unlink(path);
    rmdir(dir);
}
END_TEST

Suite *sasl_suite(void)
{
    Suite *s = suite_create("sasl");
    TCase *tc = tcase_create("sasl");
    tcase_add_test(tc, test_scram_rfc7677_vector);
    tcase_add_test(tc, test_scram_sha512_exchange);
    tcase_add_test(tc, test_scram_final_refusals);
    tcase_add_test(tc, test_scram_first_refusals);
    tcase_add_test(tc, test_scram_credential_limits);
    tcase_add_test(tc, test_base64_decode_strict);
    tcase_add_test(tc, test_plain_parse);
    tcase_add_test(tc, test_jaas_users);
    tcase_add_test(tc, test_plain_session);
    tcase_add_test(tc, test_preauth_gate);
    tcase_add_test(tc, test_store_persists);
    suite_add_tcase(s, tc);
    return s;
}
