/* runnel: a Kafka-compatible broker. Usage: runnel [server.properties] [--override k=v ...]
 *        runnel format -t CLUSTER_ID -c server.properties   (cluster mode, docs/cluster.md) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kb_broker.h"
#include "kb_meta_props.h"
#include "kb_config_doc.h"
#include "kb_config.h"
#include "kb_log.h"
#include "kb_server.h"

#ifndef RUNNEL_VERSION
#define RUNNEL_VERSION "unknown"
#endif

extern char **environ;

static void log_key_lists(const kb_config *cfg)
{
    for (size_t i = 0; i < cfg->unknown_keys.n; i++)
        KB_LOG(KB_LL_WARN, KB_SUB_CONFIG, "msg=\"unknown configuration key\" key=%s",
               cfg->unknown_keys.v[i]);
    for (size_t i = 0; i < cfg->ignored_keys.n; i++)
        KB_LOG(KB_LL_INFO, KB_SUB_CONFIG,
               "msg=\"key does not apply to a single-node broker; ignored\" key=%s",
               cfg->ignored_keys.v[i]);
}

/* The one line a person starting the broker reads: where it listens (the
 * bound ports, so port 0 shows the real one), where the data is, how to stop. */
static void print_ready_line(const kb_broker *b)
{
    const kb_config *cfg = b->cfg;
    char line[1024];
    size_t n = 0;

    n += (size_t)snprintf(line + n, sizeof line - n, "runnel: serving");
    for (size_t i = 0; i < cfg->listeners.n && n < sizeof line; i++) {
        const kb_listener *l = &cfg->listeners.v[i];
        const char *host = l->li_host[0] ? l->li_host : "0.0.0.0";
        const char *open = strchr(host, ':') ? "[" : "", *close = open[0] ? "]" : "";
        n += (size_t)snprintf(line + n, sizeof line - n, "%s %s://%s%s%s:%u", i ? "," : "",
                              l->li_name, open, host, close, kb_server_port(b->server, i));
    }
    for (size_t i = 0; i < cfg->log_dirs.n && n < sizeof line; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s", i ? "," : "; data in ",
                              cfg->log_dirs.v[i]);
    if (n < sizeof line)
        snprintf(line + n, sizeof line - n, "; stop with Ctrl-C or kill -TERM %ld",
                 (long)getpid());
    fprintf(stderr, "%s\n", line);
    /* Container start scripts set RUNNEL_READY_LINES to the log lines that
     * tools written for Kafka wait for (docs/operations.md, "Docker"); printed as given. */
    const char *extra = getenv("RUNNEL_READY_LINES");
    if (extra != NULL && extra[0] != '\0')
        fprintf(stderr, "%s\n", extra);
    fflush(stderr);
}

/* runnel format -t ID [-c FILE] [--override k=v ...]: meta.properties in
 * every log dir and metadata.log.dir, as `kafka-storage format` writes them.
 * Without -c the configuration is the environment's and the overrides, as
 * for the broker without a file (the container images use that). */
static int format_main(int argc, char **argv)
{
    const char *cluster_id = NULL, *props = NULL;
    char *cargv[64] = {argv[0]};
    int cargc = 1;
    for (int i = 2; i < argc && cargc < 62; i++) {
        bool has_value = i + 1 < argc;
        if (has_value && (!strcmp(argv[i], "-t") || !strcmp(argv[i], "--cluster-id")))
            cluster_id = argv[++i];
        else if (has_value && (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--config")))
            props = argv[++i];
        else
            cargv[cargc++] = argv[i];
    }
    if (cluster_id == NULL) {
        fprintf(stderr, "usage: runnel format -t CLUSTER_ID [-c server.properties]\n");
        return 2;
    }
    if (props != NULL) {
        memmove(cargv + 2, cargv + 1, (size_t)(cargc - 1) * sizeof(char *));
        cargv[1] = (char *)props;
        cargc++;
    }
    char err[512] = "";
    kb_config *cfg = NULL;
    if (kb_config_load(cargc, cargv, environ, &cfg, err, sizeof(err)) != KP_ERR_NONE) {
        fprintf(stderr, "runnel format: %s\n", err);
        return 2;
    }
    int rc = 0;
    if (kb_meta_props_format(cfg, cluster_id, err, sizeof(err)) != KP_ERR_NONE) {
        fprintf(stderr, "runnel format: %s\n", err);
        rc = 1;
    } else {
        printf("Formatted %s for cluster %s (node.id %d)\n", cfg->log_dirs.v[0], cluster_id,
               cfg->node_id);
    }
    kb_config_free(cfg);
    return rc;
}

int main(int argc, char **argv)
{
    char err[512] = "";
    kb_config *cfg = NULL;
    if (argc >= 2 && strcmp(argv[1], "format") == 0)
        return format_main(argc, argv);
    if (kb_config_load(argc, argv, environ, &cfg, err, sizeof(err)) != KP_ERR_NONE) {
        fprintf(stderr, "runnel: %s; fix it in the properties file or on the command line "
                        "(runnel --help lists the keys)\n",
                err);
        return 2;
    }
    if (cfg->action == KB_CONFIG_HELP) {
        fputs(kb_config_usage(), stdout);
        kb_config_free(cfg);
        return 0;
    }
    if (cfg->action == KB_CONFIG_VERSION) {
        printf("runnel %s\n", RUNNEL_VERSION);
        kb_config_free(cfg);
        return 0;
    }
    kb_log_set_level(cfg->log_level);
    kb_log_set_subsystems(cfg->log_subsystems);
    log_key_lists(cfg);

    kb_broker broker;
    int rc = 0;
    if (kb_broker_start(&broker, cfg, err, sizeof(err)) != KP_ERR_NONE) {
        fprintf(stderr, "runnel: %s\n", err);
        rc = 1;
    } else {
        print_ready_line(&broker);
        kp_err re = kb_broker_run(&broker);
        if (re != KP_ERR_NONE && re != KP_ERR__INVAL) /* INVAL: cluster mode logged why */
            KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"event loop failed\"");
        rc = re != KP_ERR_NONE ? 1 : 0;
    }
    kb_broker_stop(&broker);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"stopped\" exit=%d", rc);
    kb_config_free(cfg);
    return rc;
}
