/*
 * powerloss: an LD_PRELOAD shim that journals what a power cut would lose.
 *
 * Job: for every file opened under $POWERLOSS_DIR, before each pwrite or
 * ftruncate it appends an undo record (the bytes and file size the call is
 * about to replace) to the journal $POWERLOSS_LOG, and after each
 * successful fdatasync/fsync a sync record. After the process is killed,
 * integration/test_powerloss.py replays the journal backwards and undoes every
 * write that no completed sync covered: the files are left as a disk would
 * hold them after losing power at the moment of the kill.
 *
 * Journal records (native byte order), back to back:
 *   'U' u64 seq, u16 path_len, path, i64 off, i64 old_size, u32 n, n bytes
 *   'S' u64 start_seq, u16 path_len, path   (covers undo records < start_seq)
 *
 * Invariants: an undo record reaches the journal before its write happens;
 * a sync record is written only after the sync returned success, and names
 * the sequence number taken when the sync started, so writes racing with a
 * sync are never counted as covered by it. Directory entries (create,
 * rename, unlink) are not journaled: only file contents are simulated.
 * A record takes several write calls, so the kill can cut the last one
 * short; the reader drops such a tail (its write or sync never happened).
 *
 * Threading: the journal is guarded by a mutex (the broker syncs on a
 * helper thread). Errors: journaling failures abort the process, so a test
 * never runs on an incomplete journal.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define PL_MAX_FD 65536
#define PL_PATH_MAX 1024

static pthread_mutex_t pl_mu = PTHREAD_MUTEX_INITIALIZER;
static char *pl_paths[PL_MAX_FD];
static int pl_journal = -1;
static uint64_t pl_seq;
static const char *pl_dir;
static size_t pl_dir_len;

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static int (*real_ftruncate)(int, off_t);
static int (*real_fdatasync)(int);
static int (*real_fsync)(int);

__attribute__((constructor)) static void pl_init(void)
{
    real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
    real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
    real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_ftruncate = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    real_fdatasync = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    pl_dir = getenv("POWERLOSS_DIR");
    const char *log = getenv("POWERLOSS_LOG");
    if (pl_dir == NULL || log == NULL)
        return;
    pl_dir_len = strlen(pl_dir);
    pl_journal = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (pl_journal < 0)
        abort();
}

static void pl_put(const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = write(pl_journal, b, n);
        if (w <= 0)
            abort();
        b += w;
        n -= (size_t)w;
    }
}

static void pl_put_path(const char *path)
{
    uint16_t len = (uint16_t)strlen(path);
    pl_put(&len, sizeof(len));
    pl_put(path, len);
}

static void pl_track(int fd, const char *path)
{
    if (fd < 0 || fd >= PL_MAX_FD || pl_journal < 0 || strncmp(path, pl_dir, pl_dir_len) != 0 ||
        strlen(path) >= PL_PATH_MAX)
        return;
    pthread_mutex_lock(&pl_mu);
    free(pl_paths[fd]);
    pl_paths[fd] = strdup(path);
    pthread_mutex_unlock(&pl_mu);
}

/* Journals the bytes [off, off + n) and the size of fd's file before a change. */
static void pl_undo(int fd, int64_t off, size_t n)
{
    if (fd < 0 || fd >= PL_MAX_FD)
        return;
    pthread_mutex_lock(&pl_mu);
    if (pl_paths[fd] != NULL) {
        struct stat st;
        if (fstat(fd, &st) != 0)
            abort();
        int64_t size = st.st_size;
        uint32_t keep = 0;
        if (off < size)
            keep = (uint32_t)((size - off) < (int64_t)n ? (size - off) : (int64_t)n);
        uint8_t *old = malloc(keep ? keep : 1);
        if (old == NULL || (keep > 0 && pread(fd, old, keep, off) != (ssize_t)keep))
            abort();
        uint8_t tag = 'U';
        uint64_t seq = ++pl_seq;
        pl_put(&tag, 1);
        pl_put(&seq, sizeof(seq));
        pl_put_path(pl_paths[fd]);
        pl_put(&off, sizeof(off));
        pl_put(&size, sizeof(size));
        pl_put(&keep, sizeof(keep));
        pl_put(old, keep);
        free(old);
    }
    pthread_mutex_unlock(&pl_mu);
}

static int pl_sync(int fd, int (*fn)(int))
{
    uint64_t start = 0;
    bool tracked = false;
    char path[PL_PATH_MAX];
    if (fd >= 0 && fd < PL_MAX_FD) {
        pthread_mutex_lock(&pl_mu);
        if (pl_paths[fd] != NULL) {
            tracked = true;
            start = pl_seq + 1;
            strcpy(path, pl_paths[fd]);
        }
        pthread_mutex_unlock(&pl_mu);
    }
    int rc = fn(fd);
    if (rc == 0 && tracked) {
        pthread_mutex_lock(&pl_mu);
        uint8_t tag = 'S';
        pl_put(&tag, 1);
        pl_put(&start, sizeof(start));
        pl_put_path(path);
        pthread_mutex_unlock(&pl_mu);
    }
    return rc;
}

int open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = real_open(path, flags, mode);
    pl_track(fd, path);
    return fd;
}

int open64(const char *path, int flags, ...) __attribute__((alias("open")));

int openat(int dirfd, const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = va_arg(ap, mode_t);
        va_end(ap);
    }
    int fd = real_openat(dirfd, path, flags, mode);
    pl_track(fd, path);
    return fd;
}

int close(int fd)
{
    if (fd >= 0 && fd < PL_MAX_FD) {
        pthread_mutex_lock(&pl_mu);
        free(pl_paths[fd]);
        pl_paths[fd] = NULL;
        pthread_mutex_unlock(&pl_mu);
    }
    return real_close(fd);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    pl_undo(fd, off, n);
    return real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) __attribute__((alias("pwrite")));

int ftruncate(int fd, off_t len)
{
    struct stat st;
    if (fstat(fd, &st) == 0)
        pl_undo(fd, len < st.st_size ? len : st.st_size,
                len < st.st_size ? (size_t)(st.st_size - len) : 0);
    return real_ftruncate(fd, len);
}

int ftruncate64(int fd, off_t len) __attribute__((alias("ftruncate")));

int fdatasync(int fd)
{
    return pl_sync(fd, real_fdatasync);
}

int fsync(int fd)
{
    return pl_sync(fd, real_fsync);
}
