// sarama commands of goclients: see main.go for the list. sarama is told
// the broker is Kafka 4.1 so that it uses the newest protocol versions it
// knows; its producer sends each record to the partition the test chose
// (sarama's default partitioner hashes keys with FNV, not murmur2).
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var saramaCommands = map[string]command{
	"create":   saramaCreate,
	"metadata": saramaMetadata,
	"produce":  saramaProduce,
	"consume":  saramaConsume,
	"group":    saramaGroup,
	"commit":   saramaCommit,
	"offsets":  saramaOffsets,
	"describe": saramaDescribe,
	"delete":   saramaDelete,
}

var saramaCodecs = map[string]sarama.CompressionCodec{
	"none":   sarama.CompressionNone,
	"gzip":   sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy,
	"lz4":    sarama.CompressionLZ4,
	"zstd":   sarama.CompressionZSTD,
}

func saramaConfig() *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V4_1_0_0
	cfg.ClientID = "runnel-it-sarama"
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	return cfg
}

// saramaAdmin runs fn with a cluster admin on a fresh connection.
func saramaAdmin(bootstrap string, fn func(sarama.ClusterAdmin) (any, error)) (any, error) {
	adm, err := sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	return fn(adm)
}

func saramaCreate(_ context.Context, args []string) (any, error) {
	bootstrap, topic, parts, configs, err := parseCreate(args)
	if err != nil {
		return nil, err
	}
	detail := &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: 1, ConfigEntries: configs}
	return saramaAdmin(bootstrap, func(adm sarama.ClusterAdmin) (any, error) {
		return map[string]any{"error": errText(adm.CreateTopic(topic, detail, false))}, nil
	})
}

func saramaMetadata(_ context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "metadata BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return saramaAdmin(args[0], func(adm sarama.ClusterAdmin) (any, error) {
		mds, err := adm.DescribeTopics([]string{args[1]})
		if err != nil {
			return nil, err
		}
		if len(mds) != 1 {
			return nil, fmt.Errorf("%d topics described, asked for one", len(mds))
		}
		md := mds[0]
		parts := []map[string]int32{}
		for _, p := range md.Partitions {
			parts = append(parts, map[string]int32{"partition": p.ID, "leader": p.Leader})
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i]["partition"] < parts[j]["partition"] })
		var topicErr error
		if md.Err != sarama.ErrNoError {
			topicErr = md.Err
		}
		return map[string]any{"error": errText(topicErr), "id": md.Uuid.String(),
			"partitions": parts}, nil
	})
}

func toSarama(topic string, r record) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition}
	// A nil Encoder is a null key or value; an empty one is empty.
	if r.Key != nil {
		m.Key = sarama.ByteEncoder(r.Key)
	}
	if r.Value != nil {
		m.Value = sarama.ByteEncoder(r.Value)
	}
	if r.Timestamp != nil {
		m.Timestamp = time.UnixMilli(*r.Timestamp)
	}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Name), Value: h.Value})
	}
	return m
}

func fromSarama(m *sarama.ConsumerMessage) record {
	ts := m.Timestamp.UnixMilli()
	r := record{Partition: m.Partition, Offset: m.Offset, Timestamp: &ts,
		Key: m.Key, Value: m.Value, Headers: []header{}}
	for _, h := range m.Headers {
		r.Headers = append(r.Headers, header{Name: string(h.Key), Value: h.Value})
	}
	return r
}

func saramaProduce(_ context.Context, args []string) (any, error) {
	pa, err := parseProduce(args, false)
	if err != nil {
		return nil, err
	}
	codec, ok := saramaCodecs[pa.codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", pa.codec)
	}
	cfg := saramaConfig()
	cfg.Producer.Return.Successes = true
	cfg.Producer.Compression = codec
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	if pa.leaderAcks {
		cfg.Producer.RequiredAcks = sarama.WaitForLocal
	}
	if pa.idempotent {
		cfg.Producer.Idempotent = true
		cfg.Net.MaxOpenRequests = 1
	}
	p, err := sarama.NewSyncProducer([]string{pa.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	recs := pa.records
	out := make([][4]int64, 0, len(recs))
	for start := 0; start < len(recs); start += chunk {
		end := min(start+chunk, len(recs))
		msgs := make([]*sarama.ProducerMessage, 0, end-start)
		for _, r := range recs[start:end] {
			msgs = append(msgs, toSarama(pa.topic, r))
		}
		if err := p.SendMessages(msgs); err != nil {
			return nil, fmt.Errorf("records %d..%d: %w", start, end-1, err)
		}
		for i, m := range msgs {
			out = append(out, [4]int64{int64(start + i), int64(m.Partition), m.Offset,
				m.Timestamp.UnixMilli()})
		}
	}
	return map[string]any{"acks": out}, nil
}

// collect reads messages from in until count came or ctx ends.
func collect(ctx context.Context, in <-chan *sarama.ConsumerMessage, errs <-chan error, count int) ([]record, error) {
	got := []record{}
	for len(got) < count {
		select {
		case m := <-in:
			got = append(got, fromSarama(m))
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d records after the deadline: %w", len(got), count, ctx.Err())
		}
	}
	return got, nil
}

func saramaConsume(ctx context.Context, args []string) (any, error) {
	ca, err := parseConsume(args)
	if err != nil {
		return nil, err
	}
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	if ca.readCommitted {
		cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	c, err := sarama.NewConsumer([]string{ca.bootstrap}, cfg)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	msgs := make(chan *sarama.ConsumerMessage)
	errs := make(chan error, ca.partitions)
	done := make(chan struct{})
	defer close(done)
	for p := range ca.partitions {
		pc, err := c.ConsumePartition(ca.topic, p, sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		defer pc.AsyncClose()
		go forward(pc, msgs, errs, done)
	}
	got, err := collect(ctx, msgs, errs, ca.count)
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": got}, nil
}

// forward passes one partition consumer's messages and first error on
// until done closes.
func forward(pc sarama.PartitionConsumer, msgs chan<- *sarama.ConsumerMessage, errs chan<- error, done <-chan struct{}) {
	for {
		select {
		case m := <-pc.Messages():
			select {
			case msgs <- m:
			case <-done:
				return
			}
		case err := <-pc.Errors():
			errs <- err
			return
		case <-done:
			return
		}
	}
}

// groupHandler hands every claimed message to msgs, marked for commit, and
// remembers the claimed partitions and the session.
type groupHandler struct {
	topic string
	msgs  chan *sarama.ConsumerMessage
	mu    sync.Mutex
	claim []int32
	sess  sarama.ConsumerGroupSession
}

func (h *groupHandler) Setup(sess sarama.ConsumerGroupSession) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sess = sess
	h.claim = append([]int32(nil), sess.Claims()[h.topic]...)
	return nil
}

func (h *groupHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *groupHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for m := range claim.Messages() {
		sess.MarkMessage(m, "")
		select {
		case h.msgs <- m:
		case <-sess.Context().Done():
			return nil
		}
	}
	return nil
}

func saramaGroup(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 4, "group BOOTSTRAP TOPIC GROUP COUNT"); err != nil {
		return nil, err
	}
	topic, group := args[1], args[2]
	count, err := strconv.Atoi(args[3])
	if err != nil {
		return nil, err
	}
	cfg := saramaConfig()
	cfg.Consumer.Return.Errors = true
	cg, err := sarama.NewConsumerGroup([]string{args[0]}, group, cfg)
	if err != nil {
		return nil, err
	}
	h := &groupHandler{topic: topic, msgs: make(chan *sarama.ConsumerMessage)}
	runCtx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() { consumed <- cg.Consume(runCtx, []string{topic}, h) }()
	got, err := collect(ctx, h.msgs, cg.Errors(), count)
	if err == nil {
		h.mu.Lock()
		h.sess.Commit()
		h.mu.Unlock()
	}
	stop()
	err = errors.Join(err, <-consumed, cg.Close())
	if err != nil {
		return nil, err
	}
	sort.Slice(h.claim, func(i, j int) bool { return h.claim[i] < h.claim[j] })
	committed, err := saramaCommitted(args[0], group, topic, h.claim)
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": got, "assigned": h.claim, "committed": committed}, nil
}

// saramaCommitted reads a group's committed offsets of topic's partitions.
func saramaCommitted(bootstrap, group, topic string, parts []int32) (map[string]int64, error) {
	res, err := saramaAdmin(bootstrap, func(adm sarama.ClusterAdmin) (any, error) {
		return adm.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	})
	if err != nil {
		return nil, err
	}
	resp := res.(*sarama.OffsetFetchResponse)
	if resp.Err != sarama.ErrNoError {
		return nil, resp.Err
	}
	out := map[int32]int64{}
	for p, b := range resp.Blocks[topic] {
		if b.Err != sarama.ErrNoError {
			return nil, fmt.Errorf("committed offset of %s[%d]: %w", topic, p, b.Err)
		}
		out[p] = b.Offset
	}
	return byPartition(out), nil
}

func saramaCommit(_ context.Context, args []string) (any, error) {
	if err := wantArgs(args, 4, "commit BOOTSTRAP GROUP TOPIC P=OFFSET..."); err != nil {
		return nil, err
	}
	group, topic := args[1], args[2]
	want, err := partitionOffsets(args[3:])
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient([]string{args[0]}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	om, err := sarama.NewOffsetManagerFromClient(group, client)
	if err != nil {
		return nil, err
	}
	for p, o := range want {
		pom, err := om.ManagePartition(topic, p)
		if err != nil {
			return nil, err
		}
		pom.MarkOffset(o, "")
		defer pom.Close()
	}
	om.Commit()
	if err := om.Close(); err != nil {
		return nil, err
	}
	parts, err := client.Partitions(topic)
	if err != nil {
		return nil, err
	}
	committed, err := saramaCommitted(args[0], group, topic, parts)
	if err != nil {
		return nil, err
	}
	return map[string]any{"committed": committed}, nil
}

func saramaOffsets(_ context.Context, args []string) (any, error) {
	if err := wantArgs(args, 4, "offsets BOOTSTRAP TOPIC PARTITIONS MILLIS"); err != nil {
		return nil, err
	}
	parts, err := atoi32(args[2])
	if err != nil {
		return nil, err
	}
	millis, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient([]string{args[0]}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	out := map[string]any{}
	for name, at := range map[string]int64{"start": sarama.OffsetOldest, "end": sarama.OffsetNewest, "after": millis} {
		offsets := map[int32]int64{}
		for p := range parts {
			if offsets[p], err = client.GetOffset(args[1], p, at); err != nil {
				return nil, fmt.Errorf("%s offset of %s[%d]: %w", name, args[1], p, err)
			}
		}
		out[name] = byPartition(offsets)
	}
	return out, nil
}

func saramaDescribe(_ context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "describe BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return saramaAdmin(args[0], func(adm sarama.ClusterAdmin) (any, error) {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: args[1]})
		if err != nil {
			return nil, err
		}
		configs := map[string]string{}
		for _, e := range entries {
			configs[e.Name] = e.Value
		}
		return map[string]any{"configs": configs}, nil
	})
}

func saramaDelete(_ context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "delete BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return saramaAdmin(args[0], func(adm sarama.ClusterAdmin) (any, error) {
		return map[string]any{"error": errText(adm.DeleteTopic(args[1]))}, nil
	})
}
