/* runnel: a Kafka-compatible broker. Usage: runnel [server.properties] [--override k=v ...] */
#include <stdio.h>
#include <stdlib.h>

#include "kb_broker.h"
#include "kb_config.h"
#include "kb_log.h"

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

int main(int argc, char **argv)
{
    char err[512] = "";
    kb_config *cfg = NULL;
    if (kb_config_load(argc, argv, environ, &cfg, err, sizeof(err)) != KP_ERR_NONE) {
        fprintf(stderr, "runnel: %s\n", err);
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
    } else if (kb_broker_run(&broker) != KP_ERR_NONE) {
        KB_LOG(KB_LL_ERROR, KB_SUB_MAIN, "msg=\"event loop failed\"");
        rc = 1;
    }
    kb_broker_stop(&broker);
    KB_LOG(KB_LL_INFO, KB_SUB_MAIN, "msg=\"stopped\" exit=%d", rc);
    kb_config_free(cfg);
    return rc;
}
