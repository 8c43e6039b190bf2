// Consumer-group membership with kafkajs for test_group_consumers.py;
// prints one JSON object on stdout.
//
//   node group.js split BOOTSTRAP TOPIC GROUP MEMBERS PARTITIONS
//       starts MEMBERS consumers of GROUP on TOPIC and waits until every
//       partition is owned by exactly one of them, each owning
//       PARTITIONS / MEMBERS; prints {assignments: [[partition, ...], ...]}
'use strict';

const { Kafka, logLevel } = require('kafkajs');

async function split(bootstrap, topic, group, members, partitions) {
  const kafka = new Kafka({
    clientId: 'runnel-it-kafkajs-group',
    brokers: [bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, label, log }) => {
      console.error(`kafkajs ${label} ${namespace}: ${log.message}`);
    },
  });
  const owned = [];
  const consumers = [];
  for (let i = 0; i < members; i++) {
    const c = kafka.consumer({ groupId: group, sessionTimeout: 10000, heartbeatInterval: 500 });
    owned.push([]);
    c.on(c.events.GROUP_JOIN, (e) => {
      owned[i] = (e.payload.memberAssignment[topic] || []).slice().sort((a, b) => a - b);
    });
    await c.connect();
    await c.subscribe({ topics: [topic] });
    await c.run({ eachMessage: async () => {} });
    consumers.push(c);
  }
  const share = partitions / members;
  const done = () => {
    const all = owned.flat();
    return owned.every((o) => o.length === share) && new Set(all).size === partitions;
  };
  const deadline = Date.now() + 90000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  const snapshot = owned.map((o) => o.slice()); // leaving members rebalance the rest
  for (const c of consumers) await c.disconnect();
  console.log(JSON.stringify({ assignments: snapshot }));
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd !== 'split') {
  console.error('usage: node group.js split BOOTSTRAP TOPIC GROUP MEMBERS PARTITIONS');
  process.exit(2);
}
split(args[0], args[1], args[2], Number(args[3]), Number(args[4])).catch((e) => {
  console.error(e);
  process.exit(1);
});
