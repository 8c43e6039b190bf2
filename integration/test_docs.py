"""The reference pages say what a live broker does: every broker and topic key
DescribeConfigs lists is in docs/configuration.md with the default the broker
reports, and docs/compatibility.md's API table is ApiVersions' answer. Runnel
only: the pages describe Runnel."""

import re

import pytest

import wire
from procs import REPO

CONFIG_DOC = (REPO / "docs" / "configuration.md").read_text()
COMPAT_DOC = (REPO / "docs" / "compatibility.md").read_text()


pytestmark = pytest.mark.usefixtures("runnel_only")


def doc_rows(text, heading):
    """{key: default} of the table under `## heading`."""
    section = text.split("## " + heading + "\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for m in re.finditer(r"^\| `([^`]+)` \| \w+ \| `([^`]*)` \|", section, re.M):
        rows[m.group(1)] = m.group(2)
    return rows


def described(broker, restype, name):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, ConfigResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(restype, name)
    return admin.describe_configs([res])[res].result(timeout=30), ck


def shown(value):
    return "(none)" if value is None else ('""' if value == "" else value)


def test_every_broker_key_documented_with_its_default(broker):
    configs, _ = described(broker, "BROKER", "1")
    rows = doc_rows(CONFIG_DOC, "Broker keys")
    missing = sorted(k for k in configs if k not in rows and not k.startswith(("ssl.", "sasl.")))
    assert not missing, "keys DescribeConfigs lists but docs/configuration.md does not: %s" % missing
    wrong = {k: (rows[k], shown(c.value)) for k, c in configs.items()
             if k in rows and c.is_default and not c.is_sensitive and rows[k] != shown(c.value)}
    assert not wrong, "documented default != broker's default: %s" % wrong


def test_every_topic_key_documented(broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("docs-topic", 1, 1)])["docs-topic"].result(timeout=30)
    configs, _ = described(broker, "TOPIC", "docs-topic")
    rows = doc_rows(CONFIG_DOC, "Topic keys")
    missing = sorted(k for k in configs if k not in rows)
    assert not missing, "topic keys not in docs/configuration.md: %s" % missing
    assert len(rows) == len(configs), sorted(set(rows) - set(configs))


def test_api_table_is_what_api_versions_answers(broker):
    with wire.connect(broker.host, broker.port) as s:
        err, apis = wire.api_versions_v0(s, 1)
    assert err == 0
    documented = {int(k): (int(lo), int(hi)) for k, lo, hi in
                  re.findall(r"^\| \w+ \| (\d+) \| (\d+)-(\d+) \|", COMPAT_DOC, re.M)}
    assert documented == apis


def test_dispatch_table_names_the_file_of_each_handler():
    """kb_dispatch.def says which broker/api/ file serves each API; hold it to the code."""
    api = REPO / "broker" / "api"
    rows = re.findall(r"^X\((\w+), (\w+), \d+, \w+, \w+, (\w+)\)$",
                      (api / "kb_dispatch.def").read_text(), re.M)
    assert len(rows) > 40
    for key, name, stem in rows:
        text = (api / (stem + ".c")).read_text()
        assert re.search(r"^kp_err kb_h_%s\(" % name, text, re.M), (key, stem)
