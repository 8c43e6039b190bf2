/*
 * kb_cdoc: one-line documentation of config keys, in Runnel's own words,
 * for DescribeConfigs with include_documentation.
 *
 * Invariants: 1. Every key gets a non-NULL text (a generic one by prefix
 * when the key has none of its own). 2. The table is sorted by key.
 * Ownership: static strings. Threading: any. Errors: none.
 */
#ifndef KB_CDOC_H
#define KB_CDOC_H

const char *kb_cdoc(const char *key);

#endif
