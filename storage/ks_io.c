#include "ks_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- POSIX ops --------------------------------------------------------- */

static int px_ret(int rc)
{
    return rc < 0 ? -errno : rc;
}

static int px_open(void *ctx, const char *path, int flags, int mode)
{
    (void)ctx;
    return px_ret(open(path, flags | O_CLOEXEC, (mode_t)mode));
}

static int px_close(void *ctx, int fd)
{
    (void)ctx;
    return px_ret(close(fd));
}

static ssize_t px_pread(void *ctx, int fd, void *buf, size_t n, int64_t off)
{
    (void)ctx;
    ssize_t rc = pread(fd, buf, n, (off_t)off);
    return rc < 0 ? -errno : rc;
}

static ssize_t px_pwrite(void *ctx, int fd, const void *buf, size_t n, int64_t off)
{
    (void)ctx;
    ssize_t rc = pwrite(fd, buf, n, (off_t)off);
    return rc < 0 ? -errno : rc;
}

static int px_fdatasync(void *ctx, int fd)
{
    (void)ctx;
    return px_ret(fdatasync(fd));
}

static int px_ftruncate(void *ctx, int fd, int64_t len)
{
    (void)ctx;
    return px_ret(ftruncate(fd, (off_t)len));
}

static int px_fsize(void *ctx, int fd, int64_t *size, int64_t *mtime_ms)
{
    (void)ctx;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size = (int64_t)st.st_size;
    if (mtime_ms != NULL)
        *mtime_ms = (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
    return 0;
}

static int px_rename(void *ctx, const char *from, const char *to)
{
    (void)ctx;
    return px_ret(rename(from, to));
}

static int px_unlink(void *ctx, const char *path)
{
    (void)ctx;
    return px_ret(unlink(path));
}

static int px_mkdir(void *ctx, const char *path, int mode)
{
    (void)ctx;
    return px_ret(mkdir(path, (mode_t)mode));
}

static int px_rmdir(void *ctx, const char *path)
{
    (void)ctx;
    return px_ret(rmdir(path));
}

static int px_fsync_dir(void *ctx, const char *path)
{
    (void)ctx;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = px_ret(fsync(fd));
    close(fd);
    return rc;
}

static int px_list_dir(void *ctx, const char *path, ks_io_dirent_cb *cb, void *arg)
{
    (void)ctx;
    DIR *d = opendir(path);
    if (d == NULL)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            cb(arg, e->d_name);
    }
    closedir(d);
    return 0;
}

static const ks_io_ops posix_ops = {
    .open = px_open,
    .close = px_close,
    .pread = px_pread,
    .pwrite = px_pwrite,
    .fdatasync = px_fdatasync,
    .ftruncate = px_ftruncate,
    .fsize = px_fsize,
    .rename = px_rename,
    .unlink = px_unlink,
    .mkdir = px_mkdir,
    .rmdir = px_rmdir,
    .fsync_dir = px_fsync_dir,
    .list_dir = px_list_dir,
};

ks_io ks_io_posix(void)
{
    ks_io io = {&posix_ops, NULL};
    return io;
}

/* ---- checked wrappers --------------------------------------------------- */

kp_err ks_io_err(kp_errctx *ctx, int neg_errno, const char *what, const char *path)
{
    int e = -neg_errno;
    kp_err err = KP_ERR__IO;
    if (e == ENOSPC || e == EDQUOT)
        err = KP_ERR__NOSPC;
    else if (e == ENOENT)
        err = KP_ERR__NOENT;
    else if (e == EEXIST)
        err = KP_ERR__EXISTS;
    return KP_ERRCTX(ctx, err, e, "%s %s: %s", what, path != NULL ? path : "", strerror(e));
}

kp_err ks_io_open(const ks_io *io, const char *path, int flags, int *fd, kp_errctx *ctx)
{
    int rc = io->ops->open(io->ctx, path, flags, 0644);
    if (rc < 0)
        return ks_io_err(ctx, rc, "open", path);
    *fd = rc;
    return KP_ERR_NONE;
}

void ks_io_close(const ks_io *io, int fd)
{
    if (fd >= 0)
        (void)io->ops->close(io->ctx, fd);
}

kp_err ks_io_read_some(const ks_io *io, int fd, void *buf, size_t n, int64_t off, size_t *got,
                       kp_errctx *ctx)
{
    size_t done = 0;
    while (done < n) {
        ssize_t rc = io->ops->pread(io->ctx, fd, (uint8_t *)buf + done, n - done,
                                    off + (int64_t)done);
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return ks_io_err(ctx, (int)rc, "pread", NULL);
        if (rc == 0)
            break;
        done += (size_t)rc;
    }
    *got = done;
    return KP_ERR_NONE;
}

kp_err ks_io_read_all(const ks_io *io, int fd, void *buf, size_t n, int64_t off,
                      kp_errctx *ctx)
{
    size_t got = 0;
    kp_err err = ks_io_read_some(io, fd, buf, n, off, &got, ctx);
    if (err == KP_ERR_NONE && got < n)
        err = KP_ERRCTX(ctx, KP_ERR__UNDERFLOW, 0, "pread: %zu of %zu bytes at %lld", got, n,
                        (long long)off);
    return err;
}

kp_err ks_io_write_all(const ks_io *io, int fd, const void *buf, size_t n, int64_t off,
                       kp_errctx *ctx)
{
    size_t done = 0;
    while (done < n) {
        ssize_t rc = io->ops->pwrite(io->ctx, fd, (const uint8_t *)buf + done, n - done,
                                     off + (int64_t)done);
        if (rc == -EINTR)
            continue;
        if (rc < 0)
            return ks_io_err(ctx, (int)rc, "pwrite", NULL);
        if (rc == 0)
            return ks_io_err(ctx, -ENOSPC, "pwrite", NULL);
        done += (size_t)rc;
    }
    return KP_ERR_NONE;
}

kp_err ks_io_fdatasync(const ks_io *io, int fd, kp_errctx *ctx)
{
    int rc = io->ops->fdatasync(io->ctx, fd);
    return rc < 0 ? ks_io_err(ctx, rc, "fdatasync", NULL) : KP_ERR_NONE;
}

kp_err ks_io_ftruncate(const ks_io *io, int fd, int64_t len, kp_errctx *ctx)
{
    int rc = io->ops->ftruncate(io->ctx, fd, len);
    return rc < 0 ? ks_io_err(ctx, rc, "ftruncate", NULL) : KP_ERR_NONE;
}

kp_err ks_io_fsize(const ks_io *io, int fd, int64_t *size, int64_t *mtime_ms, kp_errctx *ctx)
{
    int rc = io->ops->fsize(io->ctx, fd, size, mtime_ms);
    return rc < 0 ? ks_io_err(ctx, rc, "fstat", NULL) : KP_ERR_NONE;
}

kp_err ks_io_rename(const ks_io *io, const char *from, const char *to, kp_errctx *ctx)
{
    int rc = io->ops->rename(io->ctx, from, to);
    return rc < 0 ? ks_io_err(ctx, rc, "rename", from) : KP_ERR_NONE;
}

kp_err ks_io_unlink(const ks_io *io, const char *path, kp_errctx *ctx)
{
    int rc = io->ops->unlink(io->ctx, path);
    return rc < 0 && rc != -ENOENT ? ks_io_err(ctx, rc, "unlink", path) : KP_ERR_NONE;
}

kp_err ks_io_mkdir(const ks_io *io, const char *path, kp_errctx *ctx)
{
    int rc = io->ops->mkdir(io->ctx, path, 0755);
    return rc < 0 && rc != -EEXIST ? ks_io_err(ctx, rc, "mkdir", path) : KP_ERR_NONE;
}

kp_err ks_io_fsync_dir(const ks_io *io, const char *path, kp_errctx *ctx)
{
    int rc = io->ops->fsync_dir(io->ctx, path);
    return rc < 0 ? ks_io_err(ctx, rc, "fsync dir", path) : KP_ERR_NONE;
}

kp_err ks_io_list_dir(const ks_io *io, const char *path, ks_io_dirent_cb *cb, void *arg,
                      kp_errctx *ctx)
{
    int rc = io->ops->list_dir(io->ctx, path, cb, arg);
    return rc < 0 ? ks_io_err(ctx, rc, "opendir", path) : KP_ERR_NONE;
}

kp_err ks_io_write_file_atomic(const ks_io *io, const char *dir, const char *name,
                               const void *buf, size_t n, kp_errctx *ctx)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name) >= (int)sizeof(tmp) ||
        snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst))
        return KP_ERRCTX(ctx, KP_ERR__INVAL, 0, "path too long: %s/%s", dir, name);
    int fd = -1;
    kp_err err = ks_io_open(io, tmp, O_WRONLY | O_CREAT | O_TRUNC, &fd, ctx);
    if (err != KP_ERR_NONE)
        return err;
    err = ks_io_write_all(io, fd, buf, n, 0, ctx);
    if (err == KP_ERR_NONE)
        err = ks_io_fdatasync(io, fd, ctx);
    ks_io_close(io, fd);
    if (err == KP_ERR_NONE)
        err = ks_io_rename(io, tmp, dst, ctx);
    if (err == KP_ERR_NONE)
        err = ks_io_fsync_dir(io, dir, ctx);
    if (err != KP_ERR_NONE)
        (void)ks_io_unlink(io, tmp, NULL);
    return err;
}
