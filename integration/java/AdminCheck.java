// Drive the Java AdminClient (kafka-clients 4.x) against one broker and print
// what happened as one JSON object on stdout; test_java_admin.py checks it.
//
//   java -cp 'integration/.deps/jars/*:CLASSES' AdminCheck BOOTSTRAP TOPIC
//
// Each step records either its result or the simple name of the exception
// class it failed with, so one failing step does not hide the others.

import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListTopicsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;

public final class AdminCheck {
    private static final long TIMEOUT_S = 30;

    private final Map<String, Object> out = new LinkedHashMap<>();

    interface Step {
        Object run() throws Exception;
    }

    private void step(String name, Step s) {
        Map<String, Object> r = new LinkedHashMap<>();
        try {
            r.put("ok", s.run());
        } catch (Exception e) {
            Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            r.put("error", t.getClass().getSimpleName());
            r.put("message", String.valueOf(t.getMessage()));
        }
        out.put(name, r);
    }

    private static Object create(Admin admin, NewTopic t, boolean validateOnly) throws Exception {
        CreateTopicsOptions o = new CreateTopicsOptions().validateOnly(validateOnly);
        admin.createTopics(List.of(t), o).all().get(TIMEOUT_S, TimeUnit.SECONDS);
        return true;
    }

    private static Set<String> list(Admin admin) throws Exception {
        return new TreeSet<>(admin.listTopics(new ListTopicsOptions().listInternal(false))
                .names().get(TIMEOUT_S, TimeUnit.SECONDS));
    }

    private static Map<String, Object> node(Node n) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("id", n.id());
        m.put("host", n.host());
        m.put("port", n.port());
        return m;
    }

    private static List<Object> ids(Collection<Node> nodes) {
        List<Object> l = new ArrayList<>();
        for (Node n : nodes) {
            l.add(n.id());
        }
        return l;
    }

    private static Object describe(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames()
                .get(TIMEOUT_S, TimeUnit.SECONDS).get(topic);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("name", d.name());
        m.put("internal", d.isInternal());
        m.put("topic_id", d.topicId() == null ? null : d.topicId().toString());
        List<Object> parts = new ArrayList<>();
        for (TopicPartitionInfo p : d.partitions()) {
            Map<String, Object> pm = new LinkedHashMap<>();
            pm.put("partition", p.partition());
            pm.put("leader", p.leader() == null ? null : p.leader().id());
            pm.put("replicas", ids(p.replicas()));
            pm.put("isr", ids(p.isr()));
            parts.add(pm);
        }
        m.put("partitions", parts);
        return m;
    }

    private void run(String bootstrap, String topic) throws Exception {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(AdminClientConfig.CLIENT_ID_CONFIG, "runnel-it-java-admin");
        props.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        props.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "30000");
        try (Admin admin = Admin.create(props)) {
            NewTopic main = new NewTopic(topic, 3, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "delete"));
            step("create", () -> create(admin, main, false));
            step("create_again", () -> create(admin, new NewTopic(topic, 1, (short) 1), false));
            step("create_bad_name", () -> create(admin, new NewTopic("bad name!", 1, (short) 1), false));
            step("create_bad_partitions",
                    () -> create(admin, new NewTopic(topic + "-p0", 0, (short) 1), false));
            step("create_bad_rf", () -> create(admin, new NewTopic(topic + "-rf3", 1, (short) 3), false));
            step("create_validate_only",
                    () -> create(admin, new NewTopic(topic + "-vo", 2, (short) 1), true));
            step("create_defaults",
                    () -> create(admin, new NewTopic(topic + "-dflt", Optional.empty(), Optional.empty()),
                            false));
            // Kafka answers CreateTopics once the controller committed the topic;
            // its broker's metadata may trail by a moment, so allow 10 s.
            step("list", () -> {
                Set<String> names = list(admin);
                for (int i = 0; i < 50 && !names.containsAll(List.of(topic, topic + "-dflt")); i++) {
                    Thread.sleep(200);
                    names = list(admin);
                }
                return names;
            });
            step("describe", () -> describe(admin, topic));
            step("describe_defaults", () -> describe(admin, topic + "-dflt"));
            step("cluster", () -> {
                DescribeClusterResult c = admin.describeCluster();
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("cluster_id", c.clusterId().get(TIMEOUT_S, TimeUnit.SECONDS));
                Node ctl = c.controller().get(TIMEOUT_S, TimeUnit.SECONDS);
                m.put("controller", ctl == null ? null : node(ctl));
                List<Object> nodes = new ArrayList<>();
                for (Node n : c.nodes().get(TIMEOUT_S, TimeUnit.SECONDS)) {
                    nodes.add(node(n));
                }
                m.put("nodes", nodes);
                return m;
            });
            step("delete", () -> {
                admin.deleteTopics(List.of(topic, topic + "-dflt")).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                return true;
            });
            step("list_after_delete", () -> {
                Set<String> names = list(admin);
                for (int i = 0; i < 50 && names.contains(topic); i++) {
                    Thread.sleep(200);
                    names = list(admin);
                }
                return names;
            });
            step("describe_after_delete", () -> describe(admin, topic));
            step("delete_missing", () -> {
                admin.deleteTopics(List.of(topic + "-missing")).all().get(TIMEOUT_S, TimeUnit.SECONDS);
                return true;
            });
        }
    }

    // --- minimal JSON writer -------------------------------------------------

    private static void json(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String) {
            sb.append('"');
            for (char c : ((String) v).toCharArray()) {
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, String.valueOf(e.getKey()));
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Collection) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Collection<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else {
            json(sb, v.toString());
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: AdminCheck BOOTSTRAP TOPIC");
            System.exit(2);
        }
        AdminCheck c = new AdminCheck();
        c.run(args[0], args[1]);
        StringBuilder sb = new StringBuilder();
        json(sb, c.out);
        System.out.println(sb);
    }
}
