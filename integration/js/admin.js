// Drive kafkajs' admin client against one broker and print what happened as
// one JSON object on stdout; the pytest side (test_kafkajs_admin.py) checks it.
//
//   node admin.js BOOTSTRAP TOPIC
//
// Every step records its result or its error (name and Kafka error type), so
// a failing step is visible without stopping the steps after it.
'use strict';

const { Kafka, logLevel } = require('kafkajs');

const [bootstrap, topic] = process.argv.slice(2);
if (!bootstrap || !topic) {
  console.error('usage: node admin.js BOOTSTRAP TOPIC');
  process.exit(2);
}

const kafka = new Kafka({
  clientId: 'runnel-it-kafkajs',
  brokers: [bootstrap],
  connectionTimeout: 5000,
  requestTimeout: 15000,
  retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
  logLevel: logLevel.WARN,
  logCreator: () => ({ namespace, label, log }) => {
    console.error(`kafkajs ${label} ${namespace}: ${log.message}`);
  },
});
const admin = kafka.admin();
const out = {};

function errInfo(e) {
  const info = { name: e.name, type: e.type || null, message: e.message };
  if (Array.isArray(e.errors)) {
    info.errors = e.errors.map((x) => ({ name: x.name, type: x.type || null, topic: x.topic || null }));
  }
  // Retried requests wrap the last protocol error.
  const cause = e.originalError || e.cause;
  if (cause && cause !== e) {
    info.cause = errInfo(cause);
  }
  return info;
}

async function step(name, fn) {
  try {
    out[name] = { ok: await fn() };
  } catch (e) {
    out[name] = { error: errInfo(e) };
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  await admin.connect();
  await step('create', () =>
    admin.createTopics({
      waitForLeaders: true,
      timeout: 15000,
      topics: [{
        topic,
        numPartitions: 3,
        replicationFactor: 1,
        configEntries: [{ name: 'retention.ms', value: '3600000' }],
      }],
    }));
  // kafkajs swallows TOPIC_ALREADY_EXISTS and resolves to false.
  await step('create_again', () =>
    admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }] }));
  await step('create_bad_name', () =>
    admin.createTopics({ topics: [{ topic: 'bad name!', numPartitions: 1, replicationFactor: 1 }] }));
  await step('create_bad_partitions', () =>
    admin.createTopics({ topics: [{ topic: `${topic}-p0`, numPartitions: 0, replicationFactor: 1 }] }));
  await step('create_bad_rf', () =>
    admin.createTopics({ topics: [{ topic: `${topic}-rf3`, numPartitions: 1, replicationFactor: 3 }] }));
  await step('list', () => admin.listTopics());
  await step('metadata', () => admin.fetchTopicMetadata({ topics: [topic] }));
  await step('cluster', () => admin.describeCluster());
  await step('delete', async () => {
    await admin.deleteTopics({ topics: [topic], timeout: 15000 });
    return true;
  });
  await step('list_after_delete', async () => {
    let names = await admin.listTopics();
    for (let i = 0; i < 50 && names.includes(topic); i++) {
      await sleep(200);
      names = await admin.listTopics();
    }
    return names;
  });
  await step('delete_missing', async () => {
    await admin.deleteTopics({ topics: [`${topic}-missing`], timeout: 15000 });
    return true;
  });
}

main()
  .catch((e) => {
    out.fatal = errInfo(e);
  })
  .finally(async () => {
    try {
      await admin.disconnect();
    } catch (e) {
      out.disconnect = errInfo(e);
    }
    process.stdout.write(JSON.stringify(out) + '\n');
    process.exit(out.fatal ? 1 : 0);
  });
