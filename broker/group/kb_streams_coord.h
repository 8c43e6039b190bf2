/*
 * kb_streams_coord: the group coordinator's side of streams groups
 * (kb_streams_group): each group's settings under its group configs
 * (streams.session.timeout.ms, streams.heartbeat.interval.ms,
 * streams.num.standby.replicas over the broker's group.streams.* keys) and
 * the creation of the internal topics (repartition and changelog) a
 * topology asks for.
 *
 * Internal topics are created as Kafka's coordinator creates them: with
 * the partition count the topology resolves and the configs the client sent
 * (a config Runnel does not know is left out, logged once per topic). On a
 * single node they are made here, like an auto-created topic; in cluster
 * mode they are not (the group reports MISSING_INTERNAL_TOPICS). Only a
 * heartbeat creates them (its handler checks the principal may CREATE the
 * topic); the group's timer does not.
 *
 * Threading: loop thread only. Ownership: nothing kept.
 */
#ifndef KB_STREAMS_COORD_H
#define KB_STREAMS_COORD_H

#include "kb_context.h"
#include "kb_group.h"
#include "kb_streams_group.h"

void kb_streams_coord_env_for(kb_broker *b, const kb_group *g, kb_streams_group_env *out);
/* Creates internal topic name (partitions, configs as key/value pairs)
 * here and now, or starts it on the helper threads; KP_ERR_NONE then. */
kp_err kb_streams_coord_create_topic(kb_broker *b, const char *name, int32_t partitions,
                                     char *const *configs, int32_t nconfigs);
/* The group's heartbeat interval (what a response carries). */
int32_t kb_streams_coord_heartbeat_ms(kb_broker *b, const kb_group *g);

#endif
