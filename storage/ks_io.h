/*
 * ks_io: the one door through which storage/ touches the file system.
 *
 * Job: a small vtable of POSIX-like calls (open, pread, pwrite, fdatasync,
 * ftruncate, rename, unlink, directory fsync and listing) so tests can inject
 * EIO, ENOSPC, short writes and crashes, plus wrappers that loop over short
 * transfers and turn errno into kp_err.
 *
 * Invariants:
 *   1. Every file operation in storage/ goes through a ks_io.
 *   2. Vtable calls return >= 0 on success and -errno on failure; they never
 *      touch the thread's errno as their result.
 *   3. ks_io_write_all / ks_io_read_all either move all n bytes or fail;
 *      a short transfer is retried, a zero-byte read is KP_ERR__UNDERFLOW.
 *
 * Ownership: a ks_io value is a pair {ops, ctx}; ks_io_posix() returns one
 * with static ops and no ctx. Whoever built a ks_io keeps ctx alive while any
 * log uses it. Paths are borrowed for the call.
 *
 * Threading: the POSIX ops are thread-safe; the flush thread calls fdatasync
 * concurrently with the event loop, so a custom ctx must be thread-safe too.
 *
 * Errors: KP_ERR__NOSPC (ENOSPC, EDQUOT), KP_ERR__NOENT (ENOENT),
 * KP_ERR__EXISTS (EEXIST), KP_ERR__UNDERFLOW (end of file), KP_ERR__IO (any
 * other errno), always with kp_errctx naming the call and errno.
 */
#ifndef KS_IO_H
#define KS_IO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "kp_err.h"

/* Called once per directory entry name (not "." or ".."). */
typedef void ks_io_dirent_cb(void *arg, const char *name);

typedef struct ks_io_ops {
    int (*open)(void *ctx, const char *path, int flags, int mode);
    int (*close)(void *ctx, int fd);
    ssize_t (*pread)(void *ctx, int fd, void *buf, size_t n, int64_t off);
    ssize_t (*pwrite)(void *ctx, int fd, const void *buf, size_t n, int64_t off);
    int (*fdatasync)(void *ctx, int fd);
    int (*ftruncate)(void *ctx, int fd, int64_t len);
    int (*fsize)(void *ctx, int fd, int64_t *size, int64_t *mtime_ms);
    int (*rename)(void *ctx, const char *from, const char *to);
    int (*unlink)(void *ctx, const char *path);
    int (*mkdir)(void *ctx, const char *path, int mode);
    int (*rmdir)(void *ctx, const char *path);
    int (*fsync_dir)(void *ctx, const char *path);
    int (*list_dir)(void *ctx, const char *path, ks_io_dirent_cb *cb, void *arg);
} ks_io_ops;

typedef struct ks_io {
    const ks_io_ops *ops;
    void *ctx;
} ks_io;

/* The real file system. */
ks_io ks_io_posix(void);

/* Maps a negative errno from an op to a kp_err and fills ctx. */
kp_err ks_io_err(kp_errctx *ctx, int neg_errno, const char *what, const char *path);

kp_err ks_io_open(const ks_io *io, const char *path, int flags, int *fd, kp_errctx *ctx);
/* Closes fd, ignoring failure (a descriptor is gone after close either way). */
void ks_io_close(const ks_io *io, int fd);
kp_err ks_io_read_all(const ks_io *io, int fd, void *buf, size_t n, int64_t off,
                      kp_errctx *ctx);
/* Reads up to n bytes; *got < n only at end of file. */
kp_err ks_io_read_some(const ks_io *io, int fd, void *buf, size_t n, int64_t off, size_t *got,
                       kp_errctx *ctx);
kp_err ks_io_write_all(const ks_io *io, int fd, const void *buf, size_t n, int64_t off,
                       kp_errctx *ctx);
kp_err ks_io_fdatasync(const ks_io *io, int fd, kp_errctx *ctx);
kp_err ks_io_ftruncate(const ks_io *io, int fd, int64_t len, kp_errctx *ctx);
kp_err ks_io_fsize(const ks_io *io, int fd, int64_t *size, int64_t *mtime_ms, kp_errctx *ctx);
kp_err ks_io_rename(const ks_io *io, const char *from, const char *to, kp_errctx *ctx);
/* A missing file is success. */
kp_err ks_io_unlink(const ks_io *io, const char *path, kp_errctx *ctx);
/* An existing directory is success. */
kp_err ks_io_mkdir(const ks_io *io, const char *path, kp_errctx *ctx);
kp_err ks_io_fsync_dir(const ks_io *io, const char *path, kp_errctx *ctx);
kp_err ks_io_list_dir(const ks_io *io, const char *path, ks_io_dirent_cb *cb, void *arg,
                      kp_errctx *ctx);

/* Writes buf to dir/name durably: dir/name.tmp, fdatasync, rename, fsync(dir). */
kp_err ks_io_write_file_atomic(const ks_io *io, const char *dir, const char *name,
                               const void *buf, size_t n, kp_errctx *ctx);

#endif
