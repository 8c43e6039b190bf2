// A Kafka Streams word count for integration/test_kafka_streams.py.
// needs: kafka-streams
//
//   StreamsApp BOOTSTRAP APP_ID INPUT OUTPUT WINDOW_OUTPUT GUARANTEE STATE_DIR [CHANGELOG]
//
// GUARANTEE is a processing.guarantee (exactly_once_v2, at_least_once);
// CHANGELOG, as "key=value,key=value", are topic configs for both stores'
// changelogs (Materialized.withLoggingEnabled). The stores are RocksDB
// stores, in STATE_DIR. The topology, from INPUT (values are lines of
// words, keys unused):
//
//   flatMapValues(split on spaces)
//     -> groupBy(word)  [repartition topic APP_ID-by-word-repartition]
//        -> count       [store "counts", changelog APP_ID-counts-changelog]
//        -> OUTPUT      (key word, value the count as a big-endian long)
//     -> groupBy(word)  [repartition topic APP_ID-by-word-window-repartition]
//        -> windowedBy(1 minute tumbling windows, 1 hour grace)
//        -> count       [store "window-counts", changelog APP_ID-window-counts-changelog]
//        -> WINDOW_OUTPUT (key "word@windowStartMs", value the count)
//
// System property streams.props, as "key=value,key=value", adds Streams
// configs (test_streams_groups.py: group.protocol=streams; the consumer's
// session and heartbeat settings are then left out, the broker owns them).
//
// The record cache is off, so every input word yields one output record per
// aggregation: a word's counts on OUTPUT run 1, 2, 3, ...
//
// Prints, one per line: "state NEW_STATE" on each state change, "tasks T1 T2
// ..." whenever the instance's active tasks change (sorted task ids), "restored
// STORE PARTITION N" after a store partition was restored from its
// changelog (N records), "error CLASS MESSAGE" if a stream thread dies (the
// app then shuts down and exits 1). Runs until SIGTERM, whose shutdown hook
// closes the app cleanly (commit, producers and consumers closed) and then
// prints "closed".

import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

public class StreamsApp {
    static final Duration WINDOW = Duration.ofMinutes(1);
    static final Duration GRACE = Duration.ofHours(1);

    static StreamsBuilder topology(String input, String output, String windowOutput,
                                   Map<String, String> changelog) {
        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> words = b.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .flatMapValues(line -> Arrays.asList(line.trim().split(" +")));

        Materialized<String, Long, KeyValueStore<Bytes, byte[]>> counts = Materialized.as("counts");
        words.groupBy((k, w) -> w, Grouped.with("by-word", Serdes.String(), Serdes.String()))
                .count(counts.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long())
                        .withLoggingEnabled(changelog))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        Materialized<String, Long, WindowStore<Bytes, byte[]>> windowCounts =
                Materialized.as("window-counts");
        words.groupBy((k, w) -> w, Grouped.with("by-word-window", Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeAndGrace(WINDOW, GRACE))
                .count(windowCounts.withKeySerde(Serdes.String()).withValueSerde(Serdes.Long())
                        .withLoggingEnabled(changelog))
                .toStream()
                .map((wk, n) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), n))
                .to(windowOutput, Produced.with(Serdes.String(), Serdes.Long()));
        return b;
    }

    static Properties config(String bootstrap, String appId, String guarantee, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        // Delete consumed repartition records (DeleteRecords) after commits
        // at least this far apart, not only every 30 s.
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 200);
        // A restarted instance joins while the group still holds the old
        // member (Streams' consumers do not leave on close): keep the wait short.
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 500);
        for (String kv : System.getProperty("streams.props", "").split(",")) {
            String[] f = kv.split("=", 2);
            if (f.length == 2)
                p.put(f[0], f[1]);
        }
        if ("streams".equals(p.get("group.protocol"))) {
            p.remove(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG));
            p.remove(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG));
        }
        return p;
    }

    static class PrintRestores implements StateRestoreListener {
        public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
        }

        public void onBatchRestored(TopicPartition tp, String store, long batchEnd, long n) {
        }

        public void onRestoreEnd(TopicPartition tp, String store, long total) {
            System.out.println("restored " + store + " " + tp.partition() + " " + total);
        }
    }

    // Prints "tasks ..." each time the active tasks differ from the last print.
    static void printTasks(KafkaStreams app, CountDownLatch done) {
        String last = null;
        while (done.getCount() > 0) {
            TreeSet<String> ids = new TreeSet<>();
            try {
                for (ThreadMetadata t : app.metadataForLocalThreads())
                    for (TaskMetadata tm : t.activeTasks())
                        ids.add(tm.taskId().toString());
            } catch (RuntimeException e) {
                ids = null; // not running yet
            }
            String now = ids == null ? null
                    : "tasks" + (ids.isEmpty() ? "" : " " + String.join(" ", ids));
            if (now != null && !now.equals(last) && app.state() == KafkaStreams.State.RUNNING) {
                System.out.println(now);
                System.out.flush();
                last = now;
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 7 && args.length != 8) {
            System.err.println("usage: StreamsApp BOOTSTRAP APP_ID INPUT OUTPUT WINDOW_OUTPUT "
                    + "GUARANTEE STATE_DIR [KEY=VALUE,...]");
            System.exit(2);
        }
        Map<String, String> changelog = new HashMap<>();
        for (String kv : args.length == 8 ? args[7].split(",") : new String[0]) {
            String[] f = kv.split("=", 2);
            changelog.put(f[0], f[1]);
        }
        StreamsBuilder b = topology(args[2], args[3], args[4], changelog);
        KafkaStreams app = new KafkaStreams(b.build(), config(args[0], args[1], args[5], args[6]));
        CountDownLatch done = new CountDownLatch(1);
        int[] exit = {0};
        app.setStateListener((now, before) -> {
            System.out.println("state " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING)
                done.countDown();
        });
        app.setGlobalStateRestoreListener(new PrintRestores());
        app.setUncaughtExceptionHandler(e -> {
            System.out.println("error " + e.getClass().getName() + " " + e.getMessage());
            exit[0] = 1;
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            app.close(Duration.ofSeconds(30));
            System.out.println("closed");
            System.out.flush();
        }));
        app.start();
        Thread tasks = new Thread(() -> printTasks(app, done));
        tasks.setDaemon(true);
        tasks.start();
        done.await();
        app.close(Duration.ofSeconds(30));
        System.out.flush();
        System.exit(exit[0]);
    }
}
