/*
 * kb_console_assets: the console page's files (HTML, CSS, JS), built into
 * the binary by embed_assets.py at build time (no CDN, no files on disk).
 *
 * Invariants: paths are unique and start with '/'; the table is constant.
 * Ownership: static data. Threading: any.
 */
#ifndef KB_CONSOLE_ASSETS_H
#define KB_CONSOLE_ASSETS_H

#include <stddef.h>
#include <stdint.h>

typedef struct kb_console_asset {
    const char *path;         /* "/index.html" */
    const char *content_type; /* "text/html; charset=utf-8" */
    const uint8_t *data;
    size_t len;
} kb_console_asset;

extern const kb_console_asset kb_console_assets[];
extern const size_t kb_console_nassets;
/* The version the build was made from (meson's project version). */
extern const char kb_console_version[];

/* The asset at path ("/" is "/index.html"), or NULL. */
const kb_console_asset *kb_console_asset_find(const char *path);

#endif
