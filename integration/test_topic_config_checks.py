"""A bad topic config value at CreateTopics gets INVALID_CONFIG with Kafka's
own text (ConfigDef's validators), the same on both targets."""

import uuid

import pytest

from conftest import require_module

ck = require_module("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

CASES = [
    ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: "
                            "Not a number of type LONG"),
    ("max.message.bytes", "2147483648", "Invalid value 2147483648 for configuration "
                                        "max.message.bytes: Not a number of type INT"),
    ("segment.bytes", "1000", "Invalid value 1000 for configuration segment.bytes: "
                              "Value must be at least 1048576"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: "
                           "Expected value to be either true or false"),
    ("message.timestamp.type", "createtime", "Invalid value createtime for configuration "
                                             "message.timestamp.type: String must be one of: "
                                             "CreateTime, LogAppendTime"),
    ("min.cleanable.dirty.ratio", "x", "Invalid value x for configuration "
                                       "min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
]


@pytest.mark.parametrize("key,value,text", CASES, ids=[c[0] for c in CASES])
def test_bad_topic_config_value(broker, key, value, text):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    name = "cfgcheck-" + uuid.uuid4().hex[:8]
    fut = admin.create_topics([NewTopic(name, 1, 1, config={key: value})])[name]
    with pytest.raises(ck.KafkaException) as info:
        fut.result(timeout=30)
    err = info.value.args[0]
    assert err.code() == ck.KafkaError.INVALID_CONFIG
    assert err.str() == text
