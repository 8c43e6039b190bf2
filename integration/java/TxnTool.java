// Transactions with the Java client (kafka-clients 4.x) for
// integration/test_transactions.py, which checks the output.
//
//   TxnTool produce BOOTSTRAP TOPIC TXID [tv]
//       one transactional producer: transaction 1 ("c1-<p>-<i>", 5 records to
//       each of partitions 0 and 1) committed, transaction 2 ("a2-...")
//       aborted, transaction 3 ("c3-...") committed; prints "committed" /
//       "aborted" after each; with "tv", then "tv2 true|false": whether the
//       producer used transaction version 2 (KIP-890 part 2)
//   TxnTool consume BOOTSTRAP TOPIC ISOLATION
//       reads every partition from the beginning up to its end offset (for
//       read_committed the last stable offset) with assign(); prints
//       "rec PARTITION OFFSET VALUE" lines, then "end P OFFSET" per partition
//   TxnTool offsets BOOTSTRAP IN OUT GROUP TXID
//       consume-transform-produce: reads IN in group GROUP (read_committed),
//       sends to OUT and sendOffsetsToTransaction; first aborts, then
//       commits; prints "committed-offset P OFFSET|-" after each (read
//       with a second consumer of the group, require_stable)
//   TxnTool fence BOOTSTRAP TOPIC TXID
//       producer A opens a transaction and sends; producer B with the same
//       transactional id initialises (fencing A); A's next send and commit
//       fail: "zombie-send CLASS" / "zombie-commit CLASS"; B commits: "b-committed"
//   TxnTool spread BOOTSTRAP TOPIC TXID N
//       N transactions, each one record "s<i>-<p>" to every partition of
//       TOPIC; every third (i % 3 == 2) aborted, the others committed;
//       prints "done N errors E" (E: transactions that failed)
//   TxnTool open BOOTSTRAP TOPIC TXID TIMEOUT_MS N
//       opens a transaction (transaction.timeout.ms TIMEOUT_MS), sends N
//       records "open-<i>" to partition 0, flushes, prints "open" and exits
//       without ending it (Runtime.halt: no abort on close)

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnTool {
    static KafkaProducer<String, String> producer(String bootstrap, String txid, int timeoutMs) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txid);
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, timeoutMs);
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String isolation, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        if (group != null)
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    static void sendBoth(KafkaProducer<String, String> prod, String topic, String prefix) {
        for (int part = 0; part < 2; part++)
            for (int i = 0; i < 5; i++)
                prod.send(new ProducerRecord<>(topic, part, "k" + i, prefix + "-" + part + "-" + i));
    }

    // Whether the producer's transaction manager negotiated transaction
    // version 2 (it reads transaction.version from ApiVersions).
    static boolean transactionV2(KafkaProducer<String, String> prod) {
        try {
            java.lang.reflect.Field f = KafkaProducer.class.getDeclaredField("transactionManager");
            f.setAccessible(true);
            Object tm = f.get(prod);
            return (Boolean) tm.getClass().getMethod("isTransactionV2Enabled").invoke(tm);
        } catch (ReflectiveOperationException e) {
            throw new RuntimeException(e);
        }
    }

    static void produce(String bootstrap, String topic, String txid, boolean reportTv) {
        try (KafkaProducer<String, String> prod = producer(bootstrap, txid, 60000)) {
            prod.initTransactions();
            prod.beginTransaction();
            sendBoth(prod, topic, "c1");
            prod.commitTransaction();
            System.out.println("committed");
            prod.beginTransaction();
            sendBoth(prod, topic, "a2");
            prod.flush();
            prod.abortTransaction();
            System.out.println("aborted");
            prod.beginTransaction();
            sendBoth(prod, topic, "c3");
            prod.commitTransaction();
            System.out.println("committed");
            if (reportTv)
                System.out.println("tv2 " + transactionV2(prod));
        }
    }

    static void spread(String bootstrap, String topic, String txid, int n) {
        int errors = 0;
        try (KafkaProducer<String, String> prod = producer(bootstrap, txid, 60000)) {
            prod.initTransactions();
            int parts = prod.partitionsFor(topic).size();
            for (int i = 0; i < n; i++) {
                try {
                    prod.beginTransaction();
                    List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> fs = new ArrayList<>();
                    for (int p = 0; p < parts; p++)
                        fs.add(prod.send(new ProducerRecord<>(topic, p, "k", "s" + i + "-" + p)));
                    for (var f : fs)
                        f.get();
                    if (i % 3 == 2)
                        prod.abortTransaction();
                    else
                        prod.commitTransaction();
                } catch (Exception e) {
                    errors++;
                    System.err.println("txn " + i + ": " + e);
                    prod.abortTransaction();
                }
            }
        }
        System.out.println("done " + n + " errors " + errors);
    }

    static List<TopicPartition> partitions(KafkaConsumer<String, String> c, String topic) {
        List<TopicPartition> tps = new ArrayList<>();
        for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofSeconds(30)))
            tps.add(new TopicPartition(topic, pi.partition()));
        tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
        return tps;
    }

    static void consume(String bootstrap, String topic, String isolation) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap, isolation, null)) {
            List<TopicPartition> tps = partitions(c, topic);
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            long deadline = System.currentTimeMillis() + 30000;
            while (System.currentTimeMillis() < deadline) {
                boolean done = true;
                for (TopicPartition tp : tps)
                    done &= c.position(tp) >= end.get(tp);
                if (done)
                    break;
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200)))
                    System.out.println("rec " + r.partition() + " " + r.offset() + " " + r.value());
            }
            for (TopicPartition tp : tps)
                System.out.println("end " + tp.partition() + " " + end.get(tp));
        }
    }

    static void printCommitted(String bootstrap, String in, String group) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap, "read_committed", group)) {
            TopicPartition tp = new TopicPartition(in, 0);
            OffsetAndMetadata om = c.committed(Collections.singleton(tp), Duration.ofSeconds(30)).get(tp);
            System.out.println("committed-offset 0 " + (om == null ? "-" : Long.toString(om.offset())));
        }
    }

    static void offsets(String bootstrap, String in, String out, String group, String txid) {
        try (KafkaProducer<String, String> prod = producer(bootstrap, txid, 60000);
             KafkaConsumer<String, String> c = consumer(bootstrap, "read_committed", group)) {
            prod.initTransactions();
            c.subscribe(Collections.singleton(in));
            for (int round = 0; round < 2; round++) {
                List<ConsumerRecord<String, String>> got = new ArrayList<>();
                long deadline = System.currentTimeMillis() + 30000;
                while (got.isEmpty() && System.currentTimeMillis() < deadline)
                    for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200)))
                        got.add(r);
                prod.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offs = new HashMap<>();
                for (ConsumerRecord<String, String> r : got) {
                    prod.send(new ProducerRecord<>(out, 0, r.key(), "out-" + r.value()));
                    offs.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                prod.sendOffsetsToTransaction(offs, c.groupMetadata());
                if (round == 0) {
                    // Sent first, so the aborted records are in the log (an abort
                    // drops whatever the producer has not sent yet).
                    prod.flush();
                    prod.abortTransaction();
                    System.out.println("aborted " + got.size());
                    for (TopicPartition tp : offs.keySet())
                        c.seek(tp, got.get(0).offset()); // read the same records again
                } else {
                    prod.commitTransaction();
                    System.out.println("committed " + got.size());
                }
                c.commitSync(Collections.emptyMap());
                System.out.flush();
                c.unsubscribe();
                printCommitted(bootstrap, in, group);
                c.subscribe(Collections.singleton(in));
            }
        }
    }

    static String failure(Runnable r) {
        try {
            r.run();
            return "none";
        } catch (Exception e) {
            Throwable t = e;
            while (t.getCause() != null)
                t = t.getCause();
            return e.getClass().getSimpleName() + "/" + t.getClass().getSimpleName();
        }
    }

    static void fence(String bootstrap, String topic, String txid) {
        KafkaProducer<String, String> a = producer(bootstrap, txid, 60000);
        a.initTransactions();
        a.beginTransaction();
        a.send(new ProducerRecord<>(topic, 0, "k", "zombie-1"));
        a.flush();
        try (KafkaProducer<String, String> b = producer(bootstrap, txid, 60000)) {
            b.initTransactions();
            System.out.println("b-initialised");
            System.out.println("zombie-send " + failure(() -> {
                try {
                    a.send(new ProducerRecord<>(topic, 0, "k", "zombie-2")).get();
                } catch (Exception e) {
                    throw new RuntimeException(e);
                }
            }));
            System.out.println("zombie-commit " + failure(a::commitTransaction));
            b.beginTransaction();
            b.send(new ProducerRecord<>(topic, 0, "k", "b-1"));
            b.commitTransaction();
            System.out.println("b-committed");
        }
        a.close(Duration.ZERO);
    }

    static void open(String bootstrap, String topic, String txid, int timeoutMs, int n) {
        KafkaProducer<String, String> prod = producer(bootstrap, txid, timeoutMs);
        prod.initTransactions();
        prod.beginTransaction();
        for (int i = 0; i < n; i++)
            prod.send(new ProducerRecord<>(topic, 0, "k", "open-" + i));
        prod.flush();
        System.out.println("open");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    public static void main(String[] args) {
        switch (args[0]) {
        case "produce" -> produce(args[1], args[2], args[3], args.length > 4 && args[4].equals("tv"));
        case "consume" -> consume(args[1], args[2], args[3]);
        case "offsets" -> offsets(args[1], args[2], args[3], args[4], args[5]);
        case "spread" -> spread(args[1], args[2], args[3], Integer.parseInt(args[4]));
        case "fence" -> fence(args[1], args[2], args[3]);
        case "open" -> open(args[1], args[2], args[3], Integer.parseInt(args[4]), Integer.parseInt(args[5]));
        default -> throw new IllegalArgumentException(args[0]);
        }
        System.out.flush();
    }
}
