#include "kb_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

kp_err kb_file_write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, name);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return KP_ERR__IO;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            close(fd);
            unlink(tmp);
            return errno == ENOSPC ? KP_ERR__NOSPC : KP_ERR__IO;
        }
        done += (size_t)n;
    }
    if (fdatasync(fd) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return KP_ERR__IO;
    }
    return fsync_dir(dir) == 0 ? KP_ERR_NONE : KP_ERR__IO;
}

kp_err kb_file_read_lines(const char *dir, const char *name, kp_err (*line)(void *arg, char *text),
                          void *arg)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return errno == ENOENT ? KP_ERR_NONE : KP_ERR__IO;
    char *text = NULL;
    size_t cap = 0;
    ssize_t n;
    kp_err e = KP_ERR_NONE;
    while (e == KP_ERR_NONE && (n = getline(&text, &cap, f)) >= 0) {
        if (n > 0 && text[n - 1] == '\n')
            text[n - 1] = '\0';
        e = line(arg, text);
    }
    free(text);
    fclose(f);
    return e;
}

kp_err kb_file_write_stream(const char *dir, const char *name, void (*emit)(void *arg, FILE *f),
                            void *arg)
{
    char *data = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&data, &len);
    if (f == NULL)
        return KP_ERR__NOMEM;
    emit(arg, f);
    if (fclose(f) != 0) {
        free(data);
        return KP_ERR__NOMEM;
    }
    kp_err e = kb_file_write_atomic(dir, name, data, len);
    free(data);
    return e;
}

void kb_value_escape(FILE *f, const char *v)
{
    for (; *v; v++) {
        if (*v == '%' || *v == '\n' || *v == '\r')
            fprintf(f, "%%%02x", (unsigned char)*v);
        else
            fputc(*v, f);
    }
}

void kb_value_unescape(char *v)
{
    char *o = v;
    for (char *p = v; *p; p++) {
        unsigned x;
        if (*p == '%' && sscanf(p + 1, "%2x", &x) == 1) {
            *o++ = (char)x;
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
}

int kb_file_mkdirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            if (mkdir(path, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}
