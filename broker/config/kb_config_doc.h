/*
 * kb_config_doc: documentation of config keys, in Runnel's own words: one line
 * per key for DescribeConfigs with include_documentation, and the --help
 * text (the most used keys, and where the full reference is).
 *
 * Invariants: 1. Every key gets a non-NULL text (a generic one by prefix
 * when the key has none of its own). 2. The table is sorted by key.
 * Ownership: static strings. Threading: any. Errors: none.
 */
#ifndef KB_CONFIG_DOC_H
#define KB_CONFIG_DOC_H

const char *kb_config_doc(const char *key);
/* The text runnel --help prints. */
const char *kb_config_usage(void);

#endif
