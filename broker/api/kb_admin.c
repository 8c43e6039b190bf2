#include "kb_admin.h"

#include <stdio.h>
#include <string.h>

#include "kb_dynconf.h"
#include "kb_features.h"
#include "kb_group_conf.h"
#include "kb_partition_log.h"
#include "kb_quota.h"
#include "kb_topics.h"

const char *kb_admin_dir(const kb_broker *b)
{
    return b->cfg->log_dirs.n > 0 ? b->cfg->log_dirs.v[0] : "/tmp/runnel-logs";
}

kp_err kb_admin_start(kb_broker *b, char *err, size_t errlen)
{
    const char *dir = kb_admin_dir(b);
    kp_err e = kb_dynconf_open(dir, &b->dynconf);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "log.dirs=%s: cannot read the dynamic broker configs (%s)", dir,
                 kp_err_name(e));
        return e;
    }
    kb_topics_set_dynconf(b->topics, b->dynconf);
    e = kb_group_conf_open(dir, &b->gconf);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "log.dirs=%s: cannot read the group configs (%s)", dir,
                 kp_err_name(e));
        return e;
    }
    e = kb_features_open(dir, &b->features);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "log.dirs=%s: cannot read the finalized feature levels (%s)", dir,
                 kp_err_name(e));
        return e;
    }
    e = kb_quotas_open(dir, b->cfg, &b->quotas);
    if (e != KP_ERR_NONE) {
        snprintf(err, errlen, "log.dirs=%s: cannot read the client quotas (%s)", dir,
                 kp_err_name(e));
        return e;
    }
    return KP_ERR_NONE;
}

void kb_admin_stop(kb_broker *b)
{
    if (b->topics != NULL)
        kb_topics_set_dynconf(b->topics, NULL);
    kb_dynconf_close(b->dynconf);
    b->dynconf = NULL;
    kb_group_conf_close(b->gconf);
    b->gconf = NULL;
    kb_quotas_close(b->quotas);
    b->quotas = NULL;
    kb_features_close(b->features);
    b->features = NULL;
}

bool kb_admin_is_self(const kb_req *req, kp_str name, bool allow_default)
{
    char self[16];
    snprintf(self, sizeof(self), "%d", req->broker->node_id);
    if (name.len <= 0)
        return allow_default;
    return kp_str_eq_c(name, self);
}

void kb_admin_configs_changed(kb_broker *b)
{
    for (size_t i = 0; i < kb_topics_count(b->topics); i++)
        kb_partition_log_config_changed(b, kb_topics_at(b->topics, i));
}
