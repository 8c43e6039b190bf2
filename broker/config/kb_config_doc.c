#include "kb_config_doc.h"

#include <stdlib.h>
#include <string.h>

static const struct doc {
    const char *key;
    const char *text;
} docs[] = {
    {"auto.create.topics.enable",
     "Create a topic when a client asks metadata for an unknown one (and may create topics). "
     "As in Kafka, that Metadata answer is UNKNOWN_TOPIC_OR_PARTITION without partitions and a "
     "Produce to an unknown topic is UNKNOWN_TOPIC_OR_PARTITION."},
    {"cleanup.policy", "What happens to old segments: delete them, compact them by key, or both."},
    {"compression.type", "Codec the log stores batches in; 'producer' keeps what the producer sent."},
    {"delete.retention.ms", "How long tombstones stay readable in a compacted log."},
    {"file.delete.delay.ms", "Wait before a deleted segment file is removed from disk."},
    {"flush.messages", "Force an fsync after this many messages (normally left to the OS)."},
    {"flush.ms", "Force an fsync after this much time (normally left to the OS)."},
    {"index.interval.bytes", "Bytes of log between two entries of the sparse offset index."},
    {"listeners", "Addresses the broker accepts connections on, as NAME://host:port."},
    {"log.dirs", "Directories that hold the partition logs."},
    {"log.retention.bytes", "Broker default for retention.bytes."},
    {"log.retention.check.interval.ms", "How often retention looks for segments to delete."},
    {"log.retention.hours", "Broker default for retention.ms, in hours."},
    {"log.retention.ms", "Broker default for retention.ms."},
    {"log.segment.bytes", "Broker default for segment.bytes."},
    {"max.compaction.lag.ms", "Longest a record may stay uncompacted."},
    {"max.message.bytes", "Largest record batch the topic accepts, after compression."},
    {"message.max.bytes", "Broker default for max.message.bytes."},
    {"message.timestamp.after.max.ms", "How far in the future a record timestamp may be."},
    {"message.timestamp.before.max.ms", "How far in the past a record timestamp may be."},
    {"message.timestamp.type", "Keep the producer's timestamp (CreateTime) or stamp on append (LogAppendTime)."},
    {"min.cleanable.dirty.ratio", "Share of uncompacted log that triggers compaction."},
    {"min.compaction.lag.ms", "Shortest time a record stays uncompacted."},
    {"min.insync.replicas", "Replicas that must have a write for acks=all; one node is always one."},
    {"num.partitions", "Partitions of an auto-created topic."},
    {"num.recovery.threads.per.data.dir", "Helper threads that open and recover the partition logs at start-up."},
    {"preallocate", "Preallocate segment files when they are created."},
    {"retention.bytes", "Delete old segments once a partition is larger than this; -1 means no limit."},
    {"retention.ms", "Delete segments whose newest record is older than this; -1 means forever."},
    {"segment.bytes", "Size at which a new log segment starts."},
    {"segment.index.bytes", "Size of each segment's offset index file."},
    {"segment.jitter.ms", "Random spread subtracted from segment.ms so segments do not all roll at once."},
    {"segment.ms", "Age at which a new log segment starts even if the current one is not full."},
    {"unclean.leader.election.enable", "Allow an out-of-sync replica to lead; moot on one node."},
};

static int doc_cmp(const void *k, const void *d)
{
    return strcmp(k, ((const struct doc *)d)->key);
}

const char *kb_config_doc(const char *key)
{
    const struct doc *d = bsearch(key, docs, sizeof(docs) / sizeof(docs[0]), sizeof(docs[0]),
                                  doc_cmp);
    if (d != NULL)
        return d->text;
    if (strncmp(key, "log.", 4) == 0)
        return "Log setting of the broker; see Kafka's broker configuration of the same name.";
    if (strncmp(key, "ssl.", 4) == 0 || strncmp(key, "sasl.", 5) == 0)
        return "Security setting of the listeners.";
    return "Accepted as in Kafka's configuration of the same name.";
}

const char *kb_config_usage(void)
{
    return "usage: runnel [server.properties] [--override key=value ...] [--version] [--help]\n"
           "\n"
           "Starts a Kafka-compatible broker. server.properties uses Kafka's keys;\n"
           "environment variables KAFKA_<KEY> (KAFKA_LOG_DIRS sets log.dirs) override the\n"
           "file, and --override key=value (or --override=key=value) overrides both.\n"
           "\n"
           "  --override key=value  set one configuration key (repeatable)\n"
           "  --version             print the version and exit\n"
           "  --help, -h            print this help and exit\n"
           "\n"
           "Most used keys (default):\n"
           "  listeners=PLAINTEXT://:9092           where to accept clients\n"
           "  advertised.listeners=                 the address clients are told to use\n"
           "                                        (set it when clients reach another host)\n"
           "  log.dirs=/tmp/runnel-logs             where the data lives\n"
           "  num.partitions=1                      partitions of an auto-created topic\n"
           "  auto.create.topics.enable=true        create a topic on first use\n"
           "  log.retention.hours=168               how long records are kept\n"
           "  log.segment.bytes=1073741824          size of one log segment file\n"
           "  runnel.flush.acks.all=fsync           acks=all waits for fdatasync;\n"
           "                                        page-cache answers as Kafka does\n"
           "  runnel.log.level=INFO                 ERROR, WARN, INFO, DEBUG or TRACE\n"
           "\n"
           "Every key, its default and where it differs from Kafka: docs/configuration.md\n"
           "in the source tree; a commented sample: config/server.properties.\n";
}
