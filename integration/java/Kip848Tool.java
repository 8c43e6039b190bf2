// The KIP-848 consumer group protocol (group.protocol=consumer) with the Java
// client (kafka-clients 4.x), for integration/test_kip848_consumer.py, which
// checks the output.
//
//   Kip848Tool share BOOTSTRAP TOPIC GROUP CONSUMERS PARTITIONS PER_PHASE
//       produces PER_PHASE records spread over the partitions; CONSUMERS
//       consumers (threads) of GROUP subscribe to TOPIC, commit after every
//       poll and record every (partition, offset) they get; once all are
//       consumed and the assignments cover every partition exactly once it
//       prints "phase1 consumed=N dupes=D", the group as Admin describes it
//       ("describe state=S type=T members=M assignor=A") and each member's
//       partitions ("member C P,P,..."); consumer 0 then leaves, PER_PHASE
//       more records are produced and the others must take everything over
//       ("phase2 consumed=N dupes=D", "member ..."); finally the committed
//       offsets ("committed P OFFSET").
//   Kip848Tool regex BOOTSTRAP PATTERN COUNT ASSIGNOR GROUP
//       one consumer subscribed with a SubscriptionPattern (the broker
//       resolves the regex) and group.remote.assignor ASSIGNOR reads until
//       it has COUNT records; prints "topic T N" per topic it read.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public class Kip848Tool {
    static final long WAIT_MS = 120_000;

    static Properties consumerProps(String bootstrap, String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        return p;
    }

    static void produce(String bootstrap, String topic, int partitions, int count, int start)
            throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        try (KafkaProducer<byte[], byte[]> prod = new KafkaProducer<>(p)) {
            for (int i = start; i < start + count; i++)
                prod.send(new ProducerRecord<>(topic, i % partitions, null, ("v" + i).getBytes()));
            prod.flush();
        }
    }

    /** One member: polls, commits, and reports what it read and owns. */
    static final class Member implements Runnable {
        final int id;
        final Properties props;
        final String topic;
        final Map<String, Integer> seen;
        final AtomicInteger dupes;
        final AtomicInteger consumed;
        final AtomicBoolean stop = new AtomicBoolean();
        volatile Set<Integer> owned = Collections.emptySet();
        volatile Throwable failure;
        final Thread thread = new Thread(this);

        Member(int id, Properties props, String topic, Map<String, Integer> seen,
               AtomicInteger dupes, AtomicInteger consumed) {
            this.id = id;
            this.props = props;
            this.topic = topic;
            this.seen = seen;
            this.dupes = dupes;
            this.consumed = consumed;
            thread.setDaemon(true); // a failed wait ends the JVM, not the test's timeout
        }

        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                c.subscribe(Collections.singletonList(topic));
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(200));
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        if (seen.putIfAbsent(r.partition() + ":" + r.offset(), id) != null)
                            dupes.incrementAndGet();
                        consumed.incrementAndGet();
                    }
                    if (!recs.isEmpty())
                        c.commitSync();
                    Set<Integer> now = new TreeSet<>();
                    for (TopicPartition tp : c.assignment())
                        now.add(tp.partition());
                    owned = now;
                }
                owned = Collections.emptySet();
            } catch (Throwable t) {
                failure = t;
            }
        }
    }

    /** Waits until n records were read, the live members own every partition once and
     *  each owns some (the first to join may briefly own all); returns what each member
     *  owned at that moment (member id to partitions). */
    static Map<Integer, Set<Integer>> await(List<Member> live, AtomicInteger consumed, int n,
                                            int partitions) throws Exception {
        long deadline = System.currentTimeMillis() + WAIT_MS;
        while (true) {
            Map<Integer, Set<Integer>> owners = new TreeMap<>();
            Set<Integer> all = new HashSet<>();
            int total = 0;
            boolean everyoneOwns = true;
            for (Member m : live) {
                if (m.failure != null)
                    throw new RuntimeException("member " + m.id + " failed", m.failure);
                Set<Integer> owned = m.owned;
                owners.put(m.id, owned);
                all.addAll(owned);
                total += owned.size();
                everyoneOwns &= !owned.isEmpty();
            }
            if (consumed.get() >= n && all.size() == partitions && total == partitions
                && everyoneOwns)
                return owners;
            if (System.currentTimeMillis() > deadline)
                throw new RuntimeException("timed out: consumed=" + consumed.get() + " owned="
                                           + total + "/" + all.size());
            Thread.sleep(100);
        }
    }

    static void printMembers(Map<Integer, Set<Integer>> owners) {
        for (Map.Entry<Integer, Set<Integer>> e : owners.entrySet()) {
            StringBuilder sb = new StringBuilder();
            for (int p : e.getValue())
                sb.append(sb.length() > 0 ? "," : "").append(p);
            System.out.println("member " + e.getKey() + " " + sb);
        }
    }

    static void describe(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin a = Admin.create(p)) {
            // Members catch up with the target epoch at their next heartbeat:
            // the group may be Reconciling for a moment after the assignments settled.
            ConsumerGroupDescription d;
            long deadline = System.currentTimeMillis() + 30_000;
            do {
                d = a.describeConsumerGroups(Collections.singletonList(group)).describedGroups()
                        .get(group).get();
                if (d.groupState() != GroupState.STABLE)
                    Thread.sleep(200);
            } while (d.groupState() != GroupState.STABLE && System.currentTimeMillis() < deadline);
            System.out.println("describe state=" + d.groupState() + " type=" + d.type()
                               + " members=" + d.members().size() + " assignor="
                               + d.partitionAssignor());
            for (MemberDescription md : d.members())
                System.out.println("described-member " + md.assignment().topicPartitions().size()
                                   + " epoch=" + md.memberEpoch().orElse(-99));
        }
    }

    static void committed(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin a = Admin.create(p)) {
            Map<TopicPartition, OffsetAndMetadata> offs =
                a.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            Map<Integer, Long> sorted = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offs.entrySet())
                sorted.put(e.getKey().partition(), e.getValue().offset());
            for (Map.Entry<Integer, Long> e : sorted.entrySet())
                System.out.println("committed " + e.getKey() + " " + e.getValue());
        }
    }

    static void share(String[] a) throws Exception {
        String bootstrap = a[1], topic = a[2], group = a[3];
        int n = Integer.parseInt(a[4]), partitions = Integer.parseInt(a[5]);
        int perPhase = Integer.parseInt(a[6]);
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        AtomicInteger dupes = new AtomicInteger(), consumed = new AtomicInteger();
        produce(bootstrap, topic, partitions, perPhase, 0);
        List<Member> live = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Member m = new Member(i, consumerProps(bootstrap, group), topic, seen, dupes, consumed);
            live.add(m);
            m.thread.start();
        }
        Map<Integer, Set<Integer>> owners = await(live, consumed, perPhase, partitions);
        System.out.println("phase1 consumed=" + consumed.get() + " dupes=" + dupes.get());
        describe(bootstrap, group);
        printMembers(owners);
        Member leaving = live.remove(0);
        leaving.stop.set(true);
        leaving.thread.join(WAIT_MS);
        produce(bootstrap, topic, partitions, perPhase, perPhase);
        owners = await(live, consumed, 2 * perPhase, partitions);
        System.out.println("phase2 consumed=" + consumed.get() + " dupes=" + dupes.get());
        printMembers(owners);
        for (Member m : live)
            m.stop.set(true);
        for (Member m : live)
            m.thread.join(WAIT_MS);
        committed(bootstrap, group);
    }

    static void regex(String[] a) throws Exception {
        String bootstrap = a[1], pattern = a[2], assignor = a[4], group = a[5];
        int count = Integer.parseInt(a[3]);
        Properties p = consumerProps(bootstrap, group);
        p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, assignor);
        Map<String, Integer> perTopic = new TreeMap<>();
        int got = 0;
        long deadline = System.currentTimeMillis() + WAIT_MS;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(new SubscriptionPattern(pattern));
            while (got < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                    perTopic.merge(r.topic(), 1, Integer::sum);
                    got++;
                }
            }
        }
        for (Map.Entry<String, Integer> e : perTopic.entrySet())
            System.out.println("topic " + e.getKey() + " " + e.getValue());
    }

    public static void main(String[] a) throws Exception {
        if (a.length >= 7 && a[0].equals("share"))
            share(a);
        else if (a.length >= 6 && a[0].equals("regex"))
            regex(a);
        else
            throw new IllegalArgumentException("usage: see the comment at the top");
        System.out.flush();
        System.exit(0);
    }
}
