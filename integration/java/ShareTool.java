// KIP-932 share groups with the Java client's KafkaShareConsumer (kafka-clients
// 4.4), for integration/test_share_groups.py, which checks the output.
//
//   ShareTool produce BOOTSTRAP TOPIC PREFIX N
//       sends N records "PREFIX-i" (i = 0..N-1) to partition 0 of TOPIC.
//   ShareTool earliest BOOTSTRAP GROUP
//       sets the group config share.auto.offset.reset=earliest.
//   ShareTool consume BOOTSTRAP TOPIC GROUP MODE WANT SECONDS
//       one share consumer; MODE implicit or explicit. In explicit mode a
//       value starting "release" is released on its first delivery and
//       accepted after, "reject" is rejected, "poison" is always released,
//       anything else accepted. Prints "got OFFSET VALUE DELIVERY ACK" per
//       record and stops after WANT accepted records, or SECONDS.
//   ShareTool hold BOOTSTRAP TOPIC GROUP WANT
//       polls (explicit mode) until it holds WANT records, prints
//       "held OFFSET" for each and "holding", then sleeps (never acknowledges)
//       until killed.
//   ShareTool partial BOOTSTRAP TOPIC GROUP MAXPOLL
//       polls (explicit mode) until one poll returns records, acknowledges
//       them as consume does except values starting "keep", which stay
//       acquired; prints "got OFFSET VALUE DELIVERY ACK" (ACK KEEP for
//       those), commits, prints "holding", then sleeps until killed.
//   ShareTool multi BOOTSTRAP TOPIC GROUP CONSUMERS TOTAL SECONDS
//       CONSUMERS share consumers (threads, max.poll.records 10) until TOTAL
//       distinct records are consumed; prints "consumer I COUNT" and
//       "total DISTINCT dupes D".

// needs: kafka-clients

import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class ShareTool {
    static Properties shareProps(String bootstrap, String group, String mode, int maxPoll) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", mode);
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, Integer.toString(maxPoll));
        return p;
    }

    static void produce(String bootstrap, String topic, String prefix, int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++)
                pr.send(new ProducerRecord<>(topic, 0, null, prefix + "-" + i));
            pr.flush();
        }
        System.out.println("produced " + n);
    }

    static void earliest(String bootstrap, String group) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                                 AlterConfigOp.OpType.SET);
            Map<ConfigResource, Collection<AlterConfigOp>> m = Map.of(r, List.of(op));
            admin.incrementalAlterConfigs(m).all().get();
        }
        System.out.println("earliest set");
    }

    static AcknowledgeType decide(ConsumerRecord<String, String> r) {
        String v = r.value();
        int d = r.deliveryCount().orElse((short) 0);
        if (v.startsWith("poison"))
            return AcknowledgeType.RELEASE;
        if (v.startsWith("reject"))
            return AcknowledgeType.REJECT;
        if (v.startsWith("release") && d <= 1)
            return AcknowledgeType.RELEASE;
        return AcknowledgeType.ACCEPT;
    }

    static void consume(String bootstrap, String topic, String group, String mode, int want,
                        int seconds) {
        boolean explicit = mode.equals("explicit");
        long end = System.currentTimeMillis() + seconds * 1000L;
        int accepted = 0;
        try (KafkaShareConsumer<String, String> c =
                 new KafkaShareConsumer<>(shareProps(bootstrap, group, mode, 500))) {
            c.subscribe(List.of(topic));
            while (accepted < want && System.currentTimeMillis() < end) {
                ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : rs) {
                    AcknowledgeType t = explicit ? decide(r) : AcknowledgeType.ACCEPT;
                    if (explicit)
                        c.acknowledge(r, t);
                    accepted += t == AcknowledgeType.ACCEPT ? 1 : 0;
                    System.out.println("got " + r.offset() + " " + r.value() + " " +
                                       r.deliveryCount().orElse((short) -1) + " " + t.name());
                }
                if (!rs.isEmpty())
                    c.commitSync(); /* implicit mode: acknowledges what this poll gave */
            }
        }
        System.out.println("done accepted=" + accepted);
    }

    static void hold(String bootstrap, String topic, String group, int want) throws Exception {
        KafkaShareConsumer<String, String> c =
            new KafkaShareConsumer<>(shareProps(bootstrap, group, "explicit", want));
        c.subscribe(List.of(topic));
        int held = 0;
        long end = System.currentTimeMillis() + 60_000;
        while (held < want && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                System.out.println("held " + r.offset());
                held++;
            }
        }
        System.out.println("holding " + held);
        System.out.flush();
        Thread.sleep(600_000);
    }

    static void partial(String bootstrap, String topic, String group, int maxPoll)
        throws Exception {
        KafkaShareConsumer<String, String> c =
            new KafkaShareConsumer<>(shareProps(bootstrap, group, "explicit", maxPoll));
        c.subscribe(List.of(topic));
        long end = System.currentTimeMillis() + 60_000;
        ConsumerRecords<String, String> rs = ConsumerRecords.empty();
        while (rs.isEmpty() && System.currentTimeMillis() < end)
            rs = c.poll(Duration.ofMillis(200));
        for (ConsumerRecord<String, String> r : rs) {
            boolean keep = r.value().startsWith("keep");
            AcknowledgeType t = keep ? null : decide(r);
            if (!keep)
                c.acknowledge(r, t);
            System.out.println("got " + r.offset() + " " + r.value() + " " +
                               r.deliveryCount().orElse((short) -1) + " " +
                               (keep ? "KEEP" : t.name()));
        }
        c.commitSync();
        System.out.println("holding");
        System.out.flush();
        Thread.sleep(600_000);
    }

    static void multi(String bootstrap, String topic, String group, int n, int total, int seconds)
        throws Exception {
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        AtomicInteger dupes = new AtomicInteger();
        int[] counts = new int[n];
        long end = System.currentTimeMillis() + seconds * 1000L;
        Thread[] ts = new Thread[n];
        for (int i = 0; i < n; i++) {
            final int idx = i;
            ts[i] = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c =
                         new KafkaShareConsumer<>(shareProps(bootstrap, group, "implicit", 10))) {
                    c.subscribe(List.of(topic));
                    while (seen.size() < total && System.currentTimeMillis() < end) {
                        ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(100));
                        for (ConsumerRecord<String, String> r : rs) {
                            if (!seen.add(r.offset())) {
                                dupes.incrementAndGet();
                                System.out.println("dupe " + r.offset() + " " +
                                                   r.deliveryCount().orElse((short) -1));
                            }
                            counts[idx]++;
                        }
                        if (!rs.isEmpty())
                            c.commitSync(); /* acknowledged before the loop may end */
                    }
                }
            });
            ts[i].start();
        }
        for (Thread t : ts)
            t.join();
        for (int i = 0; i < n; i++)
            System.out.println("consumer " + i + " " + counts[i]);
        System.out.println("total " + seen.size() + " dupes " + dupes.get());
    }

    public static void main(String[] a) throws Exception {
        switch (a[0]) {
        case "produce": produce(a[1], a[2], a[3], Integer.parseInt(a[4])); break;
        case "earliest": earliest(a[1], a[2]); break;
        case "consume":
            consume(a[1], a[2], a[3], a[4], Integer.parseInt(a[5]), Integer.parseInt(a[6]));
            break;
        case "hold": hold(a[1], a[2], a[3], Integer.parseInt(a[4])); break;
        case "partial": partial(a[1], a[2], a[3], Integer.parseInt(a[4])); break;
        case "multi":
            multi(a[1], a[2], a[3], Integer.parseInt(a[4]), Integer.parseInt(a[5]),
                  Integer.parseInt(a[6]));
            break;
        default: throw new IllegalArgumentException(a[0]);
        }
        System.exit(0);
    }
}
