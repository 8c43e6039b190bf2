// Produce and consume with kafkajs for the Produce/Fetch tests
// (test_produce_fetch_kafkajs.py); prints one JSON object on stdout.
//
//   node records.js produce BOOTSTRAP TOPIC CODEC RECORDS.json
//       send the records in order, 25 per send() call (one batch per
//       partition per call), with acks=-1 and the default (murmur2, Java
//       compatible) partitioner; prints {acks: [[i, partition, offset]]}
//   node records.js consume BOOTSTRAP TOPIC COUNT GROUP
//       consumer.run() in group GROUP from the beginning until COUNT
//       records arrived; prints {records: [{partition, offset, timestamp,
//       key, value, headers: [[name, value]]}]}
//
// Keys, values and header values travel as base64 (null stays null).
'use strict';

const fs = require('fs');
const { Kafka, logLevel, CompressionTypes, Partitioners } = require('kafkajs');

const CHUNK = 25;
const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP };

const b64 = (b) => (b === null || b === undefined ? null : Buffer.from(b).toString('base64'));
const unb64 = (s) => (s === null ? null : Buffer.from(s, 'base64'));

function client(bootstrap) {
  return new Kafka({
    clientId: 'runnel-it-kafkajs-records',
    brokers: [bootstrap],
    connectionTimeout: 5000,
    requestTimeout: 30000,
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 2000 },
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, label, log }) => {
      console.error(`kafkajs ${label} ${namespace}: ${log.message}`);
    },
  });
}

// kafkajs takes headers as an object; a repeated name becomes an array.
function headersIn(list) {
  const h = {};
  for (const [name, value] of list) {
    const v = unb64(value);
    if (name in h) {
      h[name] = [].concat(h[name], [v]);
    } else {
      h[name] = v;
    }
  }
  return h;
}

function headersOut(obj) {
  const out = [];
  for (const [name, value] of Object.entries(obj || {})) {
    for (const v of Array.isArray(value) ? value : [value]) {
      out.push([name, b64(v)]);
    }
  }
  return out;
}

async function produce(bootstrap, topic, codec, file) {
  const records = JSON.parse(fs.readFileSync(file, 'utf8'));
  // Remember which partition kafkajs' own partitioner chose for each message.
  const chosen = new Map();
  const createPartitioner = () => {
    const inner = Partitioners.DefaultPartitioner();
    return (args) => {
      const p = inner(args);
      chosen.set(args.message, p);
      return p;
    };
  };
  const producer = client(bootstrap).producer({ createPartitioner, allowAutoTopicCreation: false });
  await producer.connect();
  const acks = [];
  try {
    for (let start = 0; start < records.length; start += CHUNK) {
      const slice = records.slice(start, start + CHUNK);
      const messages = slice.map((r) => ({
        key: unb64(r.key),
        value: unb64(r.value),
        headers: headersIn(r.headers),
      }));
      const res = await producer.send({ topic, acks: -1, compression: CODECS[codec], messages });
      const base = {};
      for (const r of res) {
        if (r.errorCode !== 0) {
          throw new Error(`partition ${r.partition}: error ${r.errorCode}`);
        }
        base[r.partition] = BigInt(r.baseOffset);
      }
      const next = {};
      messages.forEach((m, j) => {
        const p = chosen.get(m);
        next[p] = (next[p] || 0n);
        acks.push([start + j, p, (base[p] + next[p]).toString()]);
        next[p] += 1n;
      });
    }
  } finally {
    await producer.disconnect();
  }
  return { acks };
}

async function consume(bootstrap, topic, count, group) {
  const consumer = client(bootstrap).consumer({ groupId: group, maxWaitTimeInMs: 200 });
  const records = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic], fromBeginning: true });
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`only ${records.length} of ${count} records in 60 s`)), 60000);
      consumer.on(consumer.events.CRASH, (e) => {
        clearTimeout(timer);
        reject(e.payload.error);
      });
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            records.push({
              partition,
              offset: message.offset,
              timestamp: message.timestamp,
              key: b64(message.key),
              value: b64(message.value),
              headers: headersOut(message.headers),
            });
            if (records.length >= count) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return { records };
}

async function main() {
  const [mode, bootstrap, topic, a, b] = process.argv.slice(2);
  if (mode === 'produce') {
    return produce(bootstrap, topic, a, b);
  }
  if (mode === 'consume') {
    return consume(bootstrap, topic, Number(a), b);
  }
  throw new Error('usage: node records.js produce|consume ...');
}

// Exit only once stdout is written out: a pipe takes 64 KiB at a time.
const finish = (obj, code) => process.stdout.write(JSON.stringify(obj) + '\n', () => process.exit(code));

main()
  .then((out) => finish(out, 0))
  .catch((e) => finish({ error: { name: e.name, type: e.type || null, message: e.message } }, 1));
