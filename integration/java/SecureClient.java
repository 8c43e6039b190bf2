// Produce and read back records over an SSL / SASL listener with the Java
// client (kafka-clients 4.x), for test_security.py. Prints one line:
//   OK <count>               every record came back, byte for byte
//   AUTH_FAILED <message>    SaslAuthenticationException (or an SSL one)
//   ERROR <class> <message>  anything else
//
//   java -cp 'integration/.deps/jars/*:CLASSES' SecureClient BOOTSTRAP PROTOCOL \
//        MECHANISM USER PASSWORD CA_PEM TOPIC COUNT
// PROTOCOL is SSL, SASL_SSL or SASL_PLAINTEXT; MECHANISM PLAIN or
// SCRAM-SHA-256/512 (ignored for SSL). CA_PEM is a PEM truststore.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class SecureClient {
    static Properties common(String[] a) {
        Properties p = new Properties();
        p.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, a[0]);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, a[1]);
        if (a[1].contains("SSL")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", a[5]);
        }
        if (a[1].startsWith("SASL")) {
            String module = a[2].equals("PLAIN")
                ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", a[2]);
            p.put("sasl.jaas.config", module + " required username=\"" + a[3]
                  + "\" password=\"" + a[4] + "\";");
        }
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "30000");
        return p;
    }

    static String value(int i) {
        return "secure-" + i + "-" + "v".repeat(i % 97);
    }

    static int run(String[] a) throws Exception {
        String topic = a[6];
        int count = Integer.parseInt(a[7]);
        Properties pp = common(a);
        pp.put("acks", "all");
        pp.put("max.block.ms", "30000");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++)
                p.send(new ProducerRecord<>(topic, 0, "k" + i, value(i))).get();
        }
        Properties cp = common(a);
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        cp.put("enable.auto.commit", "false");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(Collections.singletonList(tp));
            c.seekToBeginning(Collections.singletonList(tp));
            long deadline = System.currentTimeMillis() + 60000;
            while (got.size() < count && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500)))
                    got.add(r.value());
        }
        for (int i = 0; i < count; i++)
            if (i >= got.size() || !got.get(i).equals(value(i)))
                throw new IllegalStateException("record " + i + " differs or is missing");
        return got.size();
    }

    public static void main(String[] a) {
        try {
            System.out.println("OK " + run(a));
        } catch (Exception e) {
            Throwable t = e;
            while (t.getCause() != null && !(t instanceof AuthenticationException))
                t = t.getCause();
            if (t instanceof AuthenticationException)
                System.out.println("AUTH_FAILED " + t.getMessage());
            else
                System.out.println("ERROR " + t.getClass().getSimpleName() + " " + t.getMessage());
        }
        System.exit(0);
    }
}
