// @testcontainers/kafka's KafkaContainer (the Confluent contract: its start
// script runs /etc/confluent/docker/run) on the Runnel image, in KRaft mode
// (withKraft() accepts only a Confluent Platform version as the tag, so the
// image is given one, e.g. runnel:7.6.0); kafkajs then produces and consumes
// 10 records through the published port. Prints one JSON line.
//
//   node tc-kafka.js IMAGE
"use strict";

const { KafkaContainer } = require("@testcontainers/kafka");
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const t0 = Date.now();
  const container = await new KafkaContainer(process.argv[2]).withKraft().start();
  const startMs = Date.now() - t0;
  try {
    const brokers = [`${container.getHost()}:${container.getMappedPort(9093)}`];
    const kafka = new Kafka({ brokers, logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const messages = [];
    for (let i = 0; i < 10; i++) messages.push({ value: `tc-js-${i}` });
    await producer.send({ topic: "tc-js", messages });
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: "tc-js" });
    await consumer.connect();
    await consumer.subscribe({ topic: "tc-js", fromBeginning: true });
    const consumed = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("consume timed out")), 60000);
      consumer.run({
        eachMessage: async ({ message }) => {
          consumed.push(message.value.toString());
          if (consumed.length === 10) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
    await consumer.disconnect();
    console.log(JSON.stringify({ brokers, startMs, consumed }));
  } finally {
    await container.stop();
  }
}

main().catch((e) => {
  console.error("tc-kafka:", e && e.stack ? e.stack : e);
  process.exit(1);
});
