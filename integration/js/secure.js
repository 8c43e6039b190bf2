// kafkajs over SASL_SSL / SASL_PLAINTEXT / SSL for test_security.py: produce
// COUNT records, then read the partition's offsets back through the admin
// client. Prints one JSON object: {ok: true, high: N} or {error, message}.
//
//   node secure.js BOOTSTRAP MECHANISM USER PASSWORD CA_PEM TOPIC COUNT
//
// MECHANISM is plain, scram-sha-256, scram-sha-512, or none (TLS only);
// CA_PEM is "-" for a plaintext connection.
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const [bootstrap, mechanism, username, password, caPem, topic, countArg] = process.argv.slice(2);
  const count = parseInt(countArg, 10);
  const kafka = new Kafka({
    clientId: 'runnel-it-kafkajs-secure',
    brokers: [bootstrap],
    ssl: caPem === '-' ? false : { ca: [fs.readFileSync(caPem, 'utf8')], rejectUnauthorized: true },
    sasl: mechanism === 'none' ? undefined : { mechanism, username, password },
    connectionTimeout: 5000,
    requestTimeout: 20000,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.NOTHING,
  });
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  const admin = kafka.admin();
  try {
    await producer.connect();
    const messages = [];
    for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `kafkajs-secure-${i}` });
    await producer.send({ topic, acks: -1, messages: messages.map((m) => ({ ...m, partition: 0 })) });
    await admin.connect();
    const offsets = await admin.fetchTopicOffsets(topic);
    const p0 = offsets.find((o) => o.partition === 0);
    console.log(JSON.stringify({ ok: true, high: parseInt(p0.high, 10) }));
  } catch (e) {
    console.log(JSON.stringify({ error: e.name, message: e.message }));
  } finally {
    await producer.disconnect().catch(() => {});
    await admin.disconnect().catch(() => {});
  }
}

main();
