// testcontainers-java's KafkaContainer (org.testcontainers.kafka, the
// apache/kafka contract: its start script runs /etc/kafka/docker/run and it
// waits for "Transitioning from RECOVERY to RUNNING") on the Runnel image,
// declared a compatible substitute for apache/kafka; kafka-clients then
// produces and consumes 10 records through the published port.
//
//   java -cp 'integration/.deps/jars-tc/*:CLASSES' TcKafka IMAGE
// Prints "consumed: v0 v1 ..." and exits 0, or exits non-zero.

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.testcontainers.kafka.KafkaContainer;
import org.testcontainers.utility.DockerImageName;

public class TcKafka {
    public static void main(String[] args) throws Exception {
        DockerImageName image = DockerImageName.parse(args[0]).asCompatibleSubstituteFor("apache/kafka");
        try (KafkaContainer kafka = new KafkaContainer(image)) {
            long t0 = System.nanoTime();
            kafka.start();
            System.out.println("started_ms: " + (System.nanoTime() - t0) / 1000000);
            String bootstrap = kafka.getBootstrapServers();
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
                for (int i = 0; i < 10; i++)
                    producer.send(new ProducerRecord<>("tc-java", "v" + i)).get();
            }
            Properties c = new Properties();
            c.put("bootstrap.servers", bootstrap);
            c.put("group.id", "tc-java");
            c.put("auto.offset.reset", "earliest");
            c.put("key.deserializer", StringDeserializer.class.getName());
            c.put("value.deserializer", StringDeserializer.class.getName());
            List<String> got = new ArrayList<>();
            try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(c)) {
                consumer.subscribe(List.of("tc-java"));
                long deadline = System.currentTimeMillis() + 60000;
                while (got.size() < 10 && System.currentTimeMillis() < deadline) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500)))
                        got.add(r.value());
                }
            }
            System.out.println("consumed: " + String.join(" ", got));
        }
    }
}
