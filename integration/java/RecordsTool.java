// Produce and consume with the Java client (kafka-clients 4.x) for the
// Produce/Fetch tests; the pytest side (roundtrip.py, test_produce_fetch_java.py,
// test_timestamps.py, test_message_size.py, test_idempotence.py) writes the
// input and checks the output.
//
//   RecordsTool roundtrip BOOTSTRAP INFILE TOPIC=CODEC... [-- key=value...]
//       for each topic: produce INFILE with that compression.type (producer
//       otherwise at its defaults: idempotent, acks=all), then read the whole
//       topic back with assign() and print "topic NAME", ack/err lines, rec lines
//   RecordsTool produce BOOTSTRAP TOPIC INFILE [key=value...]
//       producer settings as key=value; "sync=true" waits for each send to
//       complete before the next one
//   RecordsTool consume BOOTSTRAP TOPIC
//   RecordsTool times BOOTSTRAP TOPIC PARTITION TS...
//       offsetsForTimes, beginningOffsets and endOffsets for one partition
//   RecordsTool stream BOOTSTRAP TOPIC
//       send records "seq-N" (N = 0, 1, ...) with keys "k<N % 8>" until stdin
//       reaches EOF, then flush and close; print one ack/err line per record
//       as it completes, then "done"
//
// Line formats (roundtrip.py explains them): bytes are "b:" + base64, null
// is "-".
//   input:  KEY VALUE TIMESTAMP|- PARTITION|- NHEADERS (NAME VALUE)*
//   output: ack I PARTITION OFFSET TIMESTAMP | err I EXCEPTION BASE64MSG |
//           rec PARTITION OFFSET TIMESTAMP KEY VALUE NHEADERS (NAME VALUE)*

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class RecordsTool {
    private static final long TIMEOUT_MS = 60_000;
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);

    private RecordsTool() {
    }

    // --- encoding -----------------------------------------------------------------

    private static String enc(byte[] b) {
        return b == null ? "-" : "b:" + Base64.getEncoder().encodeToString(b);
    }

    private static byte[] dec(String s) {
        if (s.equals("-")) {
            return null;
        }
        if (!s.startsWith("b:")) {
            throw new IllegalArgumentException("bad field " + s);
        }
        return Base64.getDecoder().decode(s.substring(2));
    }

    private static ProducerRecord<byte[], byte[]> parse(String topic, String line) {
        String[] f = line.split(" ", -1);
        Long ts = f[2].equals("-") ? null : Long.valueOf(f[2]);
        Integer part = f[3].equals("-") ? null : Integer.valueOf(f[3]);
        int n = Integer.parseInt(f[4]);
        RecordHeaders headers = new RecordHeaders();
        for (int i = 0; i < n; i++) {
            headers.add(new String(dec(f[5 + 2 * i]), StandardCharsets.UTF_8), dec(f[6 + 2 * i]));
        }
        return new ProducerRecord<>(topic, part, ts, dec(f[0]), dec(f[1]), headers);
    }

    private static String rec(ConsumerRecord<byte[], byte[]> r) {
        StringBuilder sb = new StringBuilder("rec ");
        sb.append(r.partition()).append(' ').append(r.offset()).append(' ').append(r.timestamp());
        sb.append(' ').append(enc(r.key())).append(' ').append(enc(r.value()));
        List<Header> hs = new ArrayList<>();
        r.headers().forEach(hs::add);
        sb.append(' ').append(hs.size());
        for (Header h : hs) {
            sb.append(' ').append(enc(h.key().getBytes(StandardCharsets.UTF_8)));
            sb.append(' ').append(enc(h.value()));
        }
        return sb.toString();
    }

    private static String err(long i, Throwable e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        String msg = String.valueOf(t.getMessage());
        return "err " + i + " " + t.getClass().getSimpleName() + " "
                + Base64.getEncoder().encodeToString(msg.getBytes(StandardCharsets.UTF_8));
    }

    // --- clients ----------------------------------------------------------------------

    private static KafkaProducer<byte[], byte[]> producer(String bootstrap, Map<String, String> extra) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "runnel-it-java-producer");
        p.putAll(extra);
        return new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static KafkaConsumer<byte[], byte[]> consumer(String bootstrap) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "runnel-it-java-consumer");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
        p.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        return new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer());
    }

    private static void produce(String bootstrap, String topic, List<String> lines, Map<String, String> conf)
            throws Exception {
        Map<String, String> extra = new HashMap<>(conf);
        boolean sync = "true".equals(extra.remove("sync"));
        try (KafkaProducer<byte[], byte[]> prod = producer(bootstrap, extra)) {
            String[] results = new String[lines.size()];
            for (int i = 0; i < lines.size(); i++) {
                final int idx = i;
                Callback cb = (md, e) -> results[idx] = e != null ? err(idx, e)
                        : "ack " + idx + " " + md.partition() + " " + md.offset() + " " + md.timestamp();
                try {
                    java.util.concurrent.Future<?> f = prod.send(parse(topic, lines.get(i)), cb);
                    if (sync) {
                        try {
                            f.get();
                        } catch (ExecutionException e) {
                            // reported through the callback
                        }
                    }
                } catch (RuntimeException e) {
                    results[idx] = err(idx, e);
                }
            }
            prod.flush();
            for (String r : results) {
                OUT.println(r == null ? "err -1 NoCallback -" : r);
            }
        }
    }

    private static void consume(String bootstrap, String topic) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(topic, Duration.ofMillis(TIMEOUT_MS))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps, Duration.ofMillis(TIMEOUT_MS));
            long deadline = System.currentTimeMillis() + TIMEOUT_MS;
            while (true) {
                boolean done = true;
                for (TopicPartition tp : tps) {
                    done &= c.position(tp, Duration.ofMillis(TIMEOUT_MS)) >= end.get(tp);
                }
                if (done) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("end offsets " + end + " not reached");
                }
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) {
                    if (r.offset() < end.get(new TopicPartition(r.topic(), r.partition()))) {
                        OUT.println(rec(r));
                    }
                }
            }
        }
    }

    private static void times(String bootstrap, String topic, int partition, List<Long> stamps) {
        TopicPartition tp = new TopicPartition(topic, partition);
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap)) {
            Duration t = Duration.ofMillis(TIMEOUT_MS);
            OUT.println("begin " + c.beginningOffsets(List.of(tp), t).get(tp));
            OUT.println("end " + c.endOffsets(List.of(tp), t).get(tp));
            for (long ts : stamps) {
                OffsetAndTimestamp o = c.offsetsForTimes(Map.of(tp, ts), t).get(tp);
                OUT.println("oft " + ts + " " + (o == null ? "-1 -1" : o.offset() + " " + o.timestamp()));
            }
        }
    }

    private static void stream(String bootstrap, String topic) throws Exception {
        Map<String, String> extra = new HashMap<>();
        extra.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        // Ride out broker restarts: retry for up to two minutes.
        extra.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "120000");
        extra.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        extra.put(ProducerConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, "200");
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // wait for EOF
                }
            } catch (Exception e) {
                // EOF or error: stop either way
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaProducer<byte[], byte[]> prod = producer(bootstrap, extra)) {
            long seq = 0;
            while (stdin.isAlive()) {
                final long n = seq++;
                byte[] key = ("k" + (n % 8)).getBytes(StandardCharsets.UTF_8);
                byte[] value = String.format("seq-%08d", n).getBytes(StandardCharsets.UTF_8);
                prod.send(new ProducerRecord<>(topic, key, value), (md, e) -> {
                    synchronized (OUT) {
                        OUT.println(e != null ? err(n, e) : "ack " + n + " " + md.partition() + " "
                                + md.offset() + " " + md.timestamp());
                    }
                });
                Thread.sleep(2);
            }
            prod.flush();
        }
        synchronized (OUT) {
            OUT.println("done");
        }
    }

    private static Map<String, String> props(String[] args, int from) {
        Map<String, String> m = new HashMap<>();
        for (int i = from; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            m.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        return m;
    }

    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "roundtrip": {
                List<String> lines = Files.readAllLines(Paths.get(args[2]), StandardCharsets.UTF_8);
                int sep = List.of(args).indexOf("--");
                int last = sep < 0 ? args.length : sep;
                Map<String, String> extra = sep < 0 ? new HashMap<>() : props(args, sep + 1);
                for (int i = 3; i < last; i++) {
                    String[] tc = args[i].split("=", 2);
                    Map<String, String> conf = new HashMap<>(extra);
                    conf.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, tc[1]);
                    OUT.println("topic " + tc[0]);
                    produce(args[1], tc[0], lines, conf);
                    consume(args[1], tc[0]);
                }
                break;
            }
            case "produce":
                produce(args[1], args[2], Files.readAllLines(Paths.get(args[3]), StandardCharsets.UTF_8),
                        props(args, 4));
                break;
            case "consume":
                consume(args[1], args[2]);
                break;
            case "times": {
                List<Long> stamps = new ArrayList<>();
                for (int i = 4; i < args.length; i++) {
                    stamps.add(Long.valueOf(args[i]));
                }
                times(args[1], args[2], Integer.parseInt(args[3]), stamps);
                break;
            }
            case "stream":
                stream(args[1], args[2]);
                break;
            default:
                System.err.println("usage: RecordsTool roundtrip|produce|consume|times|stream ...");
                System.exit(2);
        }
    }
}
