/*
 * kb_uuid: Kafka's 128-bit ids (topic, cluster, directory ids): making a
 * random one as Kafka does and writing it in Kafka's and in hex form.
 *
 * Invariants: kb_uuid_random never returns the zero id nor one whose
 * base64url form starts with '-'.
 *
 * Threading: every function is safe on any thread (no state).
 */
#ifndef KB_UUID_H
#define KB_UUID_H

#include <stdbool.h>

#include "kp_types.h"

/* Formats a uuid the way Kafka prints one (base64url, no padding). */
void kb_uuid_format(const kp_uuid *u, char out[23]);
/* The reverse: 22 base64url characters (Kafka's form); false for anything else. */
bool kb_uuid_parse(const char *s, kp_uuid *u);
/* A random (version 4) uuid as Kafka's Uuid.randomUuid() makes one: never
 * zero and never formatted with a leading '-'. */
void kb_uuid_random(kp_uuid *u);
/* 32 lower-case hex digits and back (the topic registry's form). */
void kb_uuid_hex(const kp_uuid *u, char out[33]);
bool kb_uuid_parse_hex(const char *s, kp_uuid *u);

#endif
