/*
 * replay: runs every file of the given corpus directories (or the given
 * files) through LLVMFuzzerTestOneInput once, so the committed seed corpus
 * is a unit test in builds without libFuzzer. Exits non-zero when no input
 * was found (an empty corpus is a packaging mistake, not a pass).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX_FILE (4 * 1024 * 1024)

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX_FILE);
    if (buf == NULL) {
        fclose(f);
        return -1;
    }
    size_t n = fread(buf, 1, REPLAY_MAX_FILE, f);
    fclose(f);
    /* An exact-size copy, so ASan sees reads past the input's end. */
    uint8_t *in = malloc(n ? n : 1);
    if (in == NULL) {
        free(buf);
        return -1;
    }
    memcpy(in, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(in, n);
    free(in);
    return 0;
}

static int run_dir(const char *dir, long *count)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        perror(dir);
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (run_file(path) != 0)
            rc = -1;
        else
            (*count)++;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv)
{
    long count = 0;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            rc = 1;
        } else if (S_ISDIR(st.st_mode)) {
            if (run_dir(argv[i], &count) != 0)
                rc = 1;
        } else if (run_file(argv[i]) != 0) {
            rc = 1;
        } else {
            count++;
        }
    }
    printf("replayed %ld input(s)\n", count);
    if (count == 0)
        rc = 1;
    return rc;
}
