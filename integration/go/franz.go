// franz-go (kgo + kadm) commands of goclients: see main.go for the list.
// franz-go speaks the newest protocol versions the broker advertises (Fetch
// with topic IDs, Produce v11+, Metadata v12+), and its producer is
// idempotent unless told otherwise.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var franzCommands = map[string]command{
	"create":    franzCreate,
	"metadata":  franzMetadata,
	"produce":   franzProduce,
	"consume":   franzConsume,
	"group":     franzGroup,
	"members":   franzMembers,
	"commit":    franzCommit,
	"offsets":   franzOffsets,
	"describe":  franzDescribe,
	"producers": franzProducers,
	"delete":    franzDelete,
	"txn":       franzTxn,
	"transact":  franzTransact,
}

var franzCodecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

func franzClient(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.ClientID("runnel-it-franz"),
		kgo.RetryTimeout(30 * time.Second),
	}
	return kgo.NewClient(append(base, opts...)...)
}

// franzAdmin runs fn with a kadm client on a fresh connection.
func franzAdmin(bootstrap string, fn func(*kadm.Client) (any, error)) (any, error) {
	cl, err := franzClient(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	return fn(kadm.NewClient(cl))
}

func franzCreate(ctx context.Context, args []string) (any, error) {
	bootstrap, topic, parts, configs, err := parseCreate(args)
	if err != nil {
		return nil, err
	}
	return franzAdmin(bootstrap, func(adm *kadm.Client) (any, error) {
		res, err := adm.CreateTopics(ctx, parts, 1, configs, topic)
		if err != nil {
			return nil, err
		}
		r := res[topic]
		return map[string]any{"error": errText(r.Err), "id": r.ID.String(),
			"partitions": r.NumPartitions}, nil
	})
}

func franzMetadata(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "metadata BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		md, err := adm.Metadata(ctx, args[1])
		if err != nil {
			return nil, err
		}
		t := md.Topics[args[1]]
		parts := []map[string]int32{}
		for _, p := range t.Partitions.Sorted() {
			parts = append(parts, map[string]int32{"partition": p.Partition, "leader": p.Leader})
		}
		return map[string]any{"error": errText(t.Err), "id": t.ID.String(),
			"partitions": parts}, nil
	})
}

func toKgo(topic string, r record) *kgo.Record {
	kr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value}
	if r.Timestamp != nil {
		kr.Timestamp = time.UnixMilli(*r.Timestamp)
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Name, Value: h.Value})
	}
	return kr
}

func fromKgo(kr *kgo.Record) record {
	ts := kr.Timestamp.UnixMilli()
	r := record{Partition: kr.Partition, Offset: kr.Offset, Timestamp: &ts,
		Key: kr.Key, Value: kr.Value, Headers: []header{}}
	for _, h := range kr.Headers {
		r.Headers = append(r.Headers, header{Name: h.Key, Value: h.Value})
	}
	return r
}

// produceAll sends recs in order, chunk records per ProduceSync call, and
// returns [i, partition, offset, timestamp] per record.
func produceAll(ctx context.Context, cl *kgo.Client, topic string, recs []record) ([][4]int64, error) {
	acks := make([][4]int64, 0, len(recs))
	for start := 0; start < len(recs); start += chunk {
		end := min(start+chunk, len(recs))
		batch := make([]*kgo.Record, 0, end-start)
		index := make(map[*kgo.Record]int, end-start)
		for i, r := range recs[start:end] {
			kr := toKgo(topic, r)
			batch = append(batch, kr)
			index[kr] = start + i
		}
		// Results come in the order the promises completed, not as sent.
		for _, res := range cl.ProduceSync(ctx, batch...) {
			i, kr := index[res.Record], res.Record
			if res.Err != nil {
				return nil, fmt.Errorf("record %d: %w", i, res.Err)
			}
			acks = append(acks, [4]int64{int64(i), int64(kr.Partition), kr.Offset,
				kr.Timestamp.UnixMilli()})
		}
	}
	return acks, nil
}

func franzProduce(ctx context.Context, args []string) (any, error) {
	pa, err := parseProduce(args, true)
	if err != nil {
		return nil, err
	}
	codec, ok := franzCodecs[pa.codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", pa.codec)
	}
	opts := []kgo.Opt{kgo.ProducerBatchCompression(codec), kgo.DefaultProduceTopic(pa.topic)}
	if !pa.idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if pa.leaderAcks {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	}
	cl, err := franzClient(pa.bootstrap, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	out, err := produceAll(ctx, cl, pa.topic, pa.records)
	if err != nil {
		return nil, err
	}
	return map[string]any{"acks": out}, nil
}

// pollUntil polls cl until count records came, and returns them.
func pollUntil(ctx context.Context, cl *kgo.Client, count int) ([]record, error) {
	got := []record{}
	for len(got) < count {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%d of %d records after the deadline: %w", len(got), count, err)
		}
		var ferr error
		fetches.EachError(func(t string, p int32, err error) {
			ferr = errors.Join(ferr, fmt.Errorf("fetch %s[%d]: %w", t, p, err))
		})
		if ferr != nil {
			return nil, ferr
		}
		fetches.EachRecord(func(kr *kgo.Record) { got = append(got, fromKgo(kr)) })
	}
	return got, nil
}

func franzConsume(ctx context.Context, args []string) (any, error) {
	ca, err := parseConsume(args)
	if err != nil {
		return nil, err
	}
	assign := map[int32]kgo.Offset{}
	for p := range ca.partitions {
		assign[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ca.topic: assign})}
	if ca.readCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := franzClient(ca.bootstrap, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got, err := pollUntil(ctx, cl, ca.count)
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": got}, nil
}

// fetchCommitted reads a group's committed offsets for topic.
func fetchCommitted(ctx context.Context, adm *kadm.Client, group, topic string) (map[string]int64, error) {
	res, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range res[topic] {
		if o.Err != nil {
			return nil, fmt.Errorf("committed offset of %s[%d]: %w", topic, p, o.Err)
		}
		out[p] = o.At
	}
	return byPartition(out), nil
}

func franzGroup(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 4, "group BOOTSTRAP TOPIC GROUP COUNT"); err != nil {
		return nil, err
	}
	count, err := strconv.Atoi(args[3])
	if err != nil {
		return nil, err
	}
	assigned := []int32{}
	cl, err := franzClient(args[0],
		kgo.ConsumerGroup(args[2]), kgo.ConsumeTopics(args[1]), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			assigned = append(assigned, m[args[1]]...)
		}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got, err := pollUntil(ctx, cl, count)
	if err != nil {
		return nil, err
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		return nil, err
	}
	committed, err := fetchCommitted(ctx, kadm.NewClient(cl), args[2], args[1])
	if err != nil {
		return nil, err
	}
	if err := cl.LeaveGroupContext(ctx); err != nil {
		return nil, err
	}
	sort.Slice(assigned, func(i, j int) bool { return assigned[i] < assigned[j] })
	return map[string]any{"records": got, "assigned": assigned, "committed": committed}, nil
}

// member is one consumer of franzMembers and the partitions it owns.
type member struct {
	cl    *kgo.Client
	mu    *sync.Mutex
	owned map[int32]bool
}

func (m *member) update(topic string, parts map[string][]int32, own bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range parts[topic] {
		if own {
			m.owned[p] = true
		} else {
			delete(m.owned, p)
		}
	}
}

func newMember(bootstrap, topic, group string, mu *sync.Mutex) (*member, error) {
	m := &member{mu: mu, owned: map[int32]bool{}}
	gained := func(_ context.Context, _ *kgo.Client, p map[string][]int32) { m.update(topic, p, true) }
	gone := func(_ context.Context, _ *kgo.Client, p map[string][]int32) { m.update(topic, p, false) }
	var err error
	m.cl, err = franzClient(bootstrap, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.OnPartitionsAssigned(gained), kgo.OnPartitionsRevoked(gone), kgo.OnPartitionsLost(gone))
	if err != nil {
		return nil, err
	}
	go func() { // poll, so that the member consumes and takes part in rebalances
		for !m.cl.PollFetches(context.Background()).IsClientClosed() {
		}
	}()
	return m, nil
}

// balanced says whether every member owns a partition and together they own
// each of the topic's partitions exactly once; it returns what each owns.
func balanced(members []*member, partitions int) (bool, [][]int32) {
	owners := map[int32]int{}
	owned := make([][]int32, len(members))
	ok := true
	for i, m := range members {
		owned[i] = []int32{}
		for p := range m.owned {
			owned[i] = append(owned[i], p)
			owners[p]++
		}
		sort.Slice(owned[i], func(a, b int) bool { return owned[i][a] < owned[i][b] })
		ok = ok && len(owned[i]) > 0
	}
	for p := range int32(partitions) {
		ok = ok && owners[p] == 1
	}
	return ok && len(owners) == partitions, owned
}

func franzMembers(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 5, "members BOOTSTRAP TOPIC GROUP PARTITIONS N"); err != nil {
		return nil, err
	}
	partitions, err := strconv.Atoi(args[3])
	if err != nil {
		return nil, err
	}
	n, err := strconv.Atoi(args[4])
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var members []*member
	defer func() {
		for _, m := range members {
			m.cl.Close()
		}
	}()
	for len(members) < n {
		m, err := newMember(args[0], args[1], args[2], &mu)
		if err != nil {
			return nil, err
		}
		members = append(members, m)
		for {
			mu.Lock()
			ok, owned := balanced(members, partitions)
			mu.Unlock()
			if ok {
				if len(members) == n {
					return map[string]any{"owned": owned}, nil
				}
				break
			}
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("%d members never shared the partitions out: %v", len(members), owned)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil, errors.New("no members asked for")
}

func franzCommit(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 3, "commit BOOTSTRAP GROUP TOPIC [P=OFFSET...]"); err != nil {
		return nil, err
	}
	want, err := partitionOffsets(args[3:])
	if err != nil {
		return nil, err
	}
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		offsets := kadm.Offsets{}
		for p, o := range want {
			offsets.Add(kadm.Offset{Topic: args[2], Partition: p, At: o, LeaderEpoch: -1})
		}
		if len(offsets) > 0 {
			res, err := adm.CommitOffsets(ctx, args[1], offsets)
			if err != nil {
				return nil, err
			}
			if err := res.Error(); err != nil {
				return nil, err
			}
		}
		committed, err := fetchCommitted(ctx, adm, args[1], args[2])
		if err != nil {
			return nil, err
		}
		return map[string]any{"committed": committed}, nil
	})
}

// listed flattens kadm's listed offsets of the one topic asked for.
func listed(lo kadm.ListedOffsets, err error) (map[string]int64, error) {
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for topic, parts := range lo {
		for p, o := range parts {
			if o.Err != nil {
				return nil, fmt.Errorf("%s[%d]: %w", topic, p, o.Err)
			}
			out[p] = o.Offset
		}
	}
	return byPartition(out), nil
}

func franzOffsets(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 4, "offsets BOOTSTRAP TOPIC PARTITIONS MILLIS"); err != nil {
		return nil, err
	}
	millis, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil {
		return nil, err
	}
	topic := args[1]
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		start, err := listed(adm.ListStartOffsets(ctx, topic))
		if err != nil {
			return nil, err
		}
		end, err := listed(adm.ListEndOffsets(ctx, topic))
		if err != nil {
			return nil, err
		}
		after, err := listed(adm.ListOffsetsAfterMilli(ctx, millis, topic))
		if err != nil {
			return nil, err
		}
		return map[string]any{"start": start, "end": end, "after": after}, nil
	})
}

func franzDescribe(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "describe BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, args[1])
		if err != nil {
			return nil, err
		}
		rc, err := rcs.On(args[1], nil)
		if err != nil {
			return nil, err
		}
		if rc.Err != nil {
			return nil, rc.Err
		}
		configs := map[string]*string{}
		synonyms := map[string][][3]any{}
		for _, c := range rc.Configs {
			configs[c.Key] = c.Value
			synonyms[c.Key] = [][3]any{}
			for _, s := range c.Synonyms {
				synonyms[c.Key] = append(synonyms[c.Key], [3]any{s.Key, s.Value, s.Source.String()})
			}
		}
		return map[string]any{"configs": configs, "synonyms": synonyms}, nil
	})
}

func franzProducers(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "producers BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	topic := args[1]
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		out, err := describeProducers(ctx, adm, topic)
		if err != nil {
			return nil, err
		}
		return map[string]any{"producers": out}, nil
	})
}

// describeProducers lists the producers DescribeProducers names per partition.
func describeProducers(ctx context.Context, adm *kadm.Client, topic string) (map[string][]map[string]int64, error) {
	res, err := adm.DescribeProducers(ctx, kadm.TopicsSet{topic: nil})
	if err != nil {
		return nil, err
	}
	out := map[string][]map[string]int64{}
	for _, p := range res[topic].Partitions {
		if p.Err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", topic, p.Partition, p.Err)
		}
		list := []map[string]int64{}
		for _, d := range p.ActiveProducers.Sorted() {
			list = append(list, map[string]int64{"producer_id": d.ProducerID,
				"epoch": int64(d.ProducerEpoch), "last_sequence": int64(d.LastSequence),
				"last_timestamp": d.LastTimestamp, "txn_start": d.CurrentTxnStartOffset,
				"coordinator_epoch": int64(d.CoordinatorEpoch)})
		}
		out[strconv.Itoa(int(p.Partition))] = list
	}
	return out, nil
}

func franzDelete(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 2, "delete BOOTSTRAP TOPIC"); err != nil {
		return nil, err
	}
	return franzAdmin(args[0], func(adm *kadm.Client) (any, error) {
		res, err := adm.DeleteTopics(ctx, args[1])
		if err != nil {
			return nil, err
		}
		return map[string]any{"error": errText(res[args[1]].Err)}, nil
	})
}

func franzTxn(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 5, "txn BOOTSTRAP TOPIC TXN_ID RECORDS.json commit|abort|open"); err != nil {
		return nil, err
	}
	recs, err := readRecords(args[3])
	if err != nil {
		return nil, err
	}
	end := map[string]kgo.TransactionEndTry{"commit": kgo.TryCommit, "abort": kgo.TryAbort,
		"open": kgo.TryAbort}
	try, ok := end[args[4]]
	if !ok {
		return nil, fmt.Errorf("end %q: want commit, abort or open", args[4])
	}
	cl, err := franzClient(args[0], kgo.TransactionalID(args[2]))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		return nil, err
	}
	acks, err := produceAll(ctx, cl, args[1], recs)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"acks": acks}
	if args[4] == "open" {
		if out["producers"], err = describeProducers(ctx, kadm.NewClient(cl), args[1]); err != nil {
			return nil, err
		}
	}
	if err := cl.EndTransaction(ctx, try); err != nil {
		return nil, err
	}
	return out, nil
}

func franzTransact(ctx context.Context, args []string) (any, error) {
	if err := wantArgs(args, 6, "transact BOOTSTRAP IN OUT GROUP TXN_ID COUNT"); err != nil {
		return nil, err
	}
	in, out, group := args[1], args[2], args[3]
	count, err := strconv.Atoi(args[5])
	if err != nil {
		return nil, err
	}
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(args[0]),
		kgo.ClientID("runnel-it-franz"), kgo.TransactionalID(args[4]),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets())
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	copied := 0
	for copied < count {
		fetches := sess.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%d of %d records copied by the deadline: %w", copied, count, err)
		}
		if err := fetches.Err(); err != nil {
			return nil, err
		}
		if err := sess.Begin(); err != nil {
			return nil, err
		}
		var batch []*kgo.Record
		fetches.EachRecord(func(kr *kgo.Record) {
			batch = append(batch, &kgo.Record{Topic: out, Key: kr.Key, Value: kr.Value,
				Headers: kr.Headers})
		})
		for i, res := range sess.Client().ProduceSync(ctx, batch...) {
			if res.Err != nil {
				return nil, fmt.Errorf("copy %d: %w", copied+i, res.Err)
			}
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return nil, err
		}
		if !committed {
			return nil, errors.New("the transaction was aborted (group rebalanced?)")
		}
		copied += len(batch)
	}
	offsets, err := fetchCommitted(ctx, kadm.NewClient(sess.Client()), group, in)
	if err != nil {
		return nil, err
	}
	return map[string]any{"copied": copied, "committed": offsets}, nil
}
