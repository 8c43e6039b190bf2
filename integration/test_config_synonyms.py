"""DescribeConfigs synonyms of topic configs, read with franz-go's kadm (which
asks for them), against a broker whose server.properties sets two keys.

Kafka lists a topic key's synonyms as: the topic's own value, then for each
broker key it follows (retention.ms: log.retention.ms, .minutes, .hours) the
dynamic and static values, then Kafka's default, which for a time in hours
or milliseconds sits on the hours key; and of the broker entries it keeps
only those from the first one that names the primary key (log.retention.ms)
on. So retention.ms shows no broker synonym at all unless log.retention.ms
itself is set, and a static value never hides the default behind it.
"""

from goclients import create

BROKER_PROPS = {"log.segment.bytes": "2097152", "log.retention.hours": "24"}


def synonyms(go_runner, broker, topic):
    out = go_runner("franz", "describe", broker.bootstrap, topic)
    return out["configs"], {k: [tuple(s) for s in v] for k, v in out["synonyms"].items()}


def test_topic_config_synonyms(go_runner, broker, topic_name):
    plain, custom = topic_name("plain"), topic_name("custom")
    create(go_runner, "franz", broker.bootstrap, plain, 1)
    create(go_runner, "franz", broker.bootstrap, custom, 1,
           **{"retention.ms": "5000", "segment.bytes": "3145728"})

    configs, syn = synonyms(go_runner, broker, plain)
    assert configs["retention.ms"] == str(24 * 3600 * 1000)
    assert syn["retention.ms"] == []  # log.retention.hours only: dropped, as Kafka does
    assert syn["segment.ms"] == []  # the default sits on log.roll.hours
    assert syn["segment.bytes"] == [("log.segment.bytes", "2097152", "STATIC_BROKER_CONFIG"),
                                    ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]
    assert syn["cleanup.policy"] == [("log.cleanup.policy", "delete", "DEFAULT_CONFIG")]

    configs, syn = synonyms(go_runner, broker, custom)
    assert syn["retention.ms"] == [("retention.ms", "5000", "DYNAMIC_TOPIC_CONFIG")]
    assert syn["segment.bytes"] == [("segment.bytes", "3145728", "DYNAMIC_TOPIC_CONFIG"),
                                    ("log.segment.bytes", "2097152", "STATIC_BROKER_CONFIG"),
                                    ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG")]
