// kafkajs admin: describeConfigs, alterConfigs and createPartitions against
// one broker; prints one JSON object for test_admin_tools.py.
//
//   node configs.js BOOTSTRAP TOPIC
'use strict';

const { Kafka, logLevel, ConfigResourceTypes } = require('kafkajs');

const [bootstrap, topic] = process.argv.slice(2);
const kafka = new Kafka({
  clientId: 'runnel-it-kafkajs-configs',
  brokers: [bootstrap],
  requestTimeout: 15000,
  retry: { retries: 2, initialRetryTime: 100 },
  logLevel: logLevel.NOTHING,
});
const admin = kafka.admin();

async function step(out, name, fn) {
  try {
    out[name] = { ok: await fn() };
  } catch (e) {
    out[name] = { error: { name: e.name, type: e.type || null, message: e.message } };
  }
}

function entries(res) {
  const r = res.resources[0];
  const m = {};
  for (const c of r.configEntries) m[c.configName] = { value: c.configValue, isDefault: c.isDefault };
  return { errorCode: r.errorCode, configs: m };
}

async function main() {
  const out = {};
  const resource = { type: ConfigResourceTypes.TOPIC, name: topic };
  await admin.connect();
  await step(out, 'create', () => admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true }));
  await step(out, 'alter', () => admin.alterConfigs({
    validateOnly: false,
    resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: '7200000' },
                                               { name: 'max.message.bytes', value: '200000' }] }],
  }).then((r) => r.resources.map((x) => x.errorCode)));
  await step(out, 'describe', () => admin.describeConfigs({ includeSynonyms: false, resources: [resource] }).then(entries));
  // full replacement: only segment.ms stays set
  await step(out, 'replace', () => admin.alterConfigs({
    resources: [{ ...resource, configEntries: [{ name: 'segment.ms', value: '3600000' }] }],
  }).then((r) => r.resources.map((x) => x.errorCode)));
  await step(out, 'describe2', () => admin.describeConfigs({ includeSynonyms: false, resources: [resource] }).then(entries));
  await step(out, 'bad', () => admin.alterConfigs({
    resources: [{ ...resource, configEntries: [{ name: 'retention.ms', value: 'soon' }] }],
  }));
  await step(out, 'partitions', () => admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] }).then(() => true));
  await step(out, 'shrink', () => admin.createPartitions({ topicPartitions: [{ topic, count: 2 }] }));
  await step(out, 'metadata', () => admin.fetchTopicMetadata({ topics: [topic] })
    .then((m) => m.topics[0].partitions.length));
  await admin.disconnect();
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.error(e); process.exit(1); });
