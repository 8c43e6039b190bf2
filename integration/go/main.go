// Command goclients drives the Go Kafka clients franz-go (kgo + kadm) and
// sarama against a broker for the integration tests (test_go_clients.py).
//
//	goclients CLIENT COMMAND ARGS...   CLIENT is franz or sarama
//
// Every command prints one JSON object on stdout and exits 0 when the client
// did what it was asked; broker-reported errors the tests want to see are
// part of that object, anything unexpected is a message on stderr and exit 1.
// Keys, values and header values travel as base64 strings, null as null.
//
// Commands (both clients unless marked):
//
//	create BOOTSTRAP TOPIC PARTITIONS [KEY=VALUE...]
//	    create a topic with replication factor 1 and the given configs
//	    -> {"error": null|"...", "id": "topic id (franz)"}
//	metadata BOOTSTRAP TOPIC
//	    -> {"error", "id", "partitions": [{"partition", "leader"}]}
//	produce [-acks all|leader] [-idempotent=BOOL] BOOTSTRAP TOPIC CODEC RECORDS.json
//	    send the records in order, CHUNK per call; franz picks partitions
//	    with its default (murmur2) partitioner, sarama sends each record to
//	    its "partition" -> {"acks": [[i, partition, offset, timestamp]]}
//	consume [-read-committed] BOOTSTRAP TOPIC PARTITIONS COUNT
//	    read every partition from its start, without a group, until COUNT
//	    records came -> {"records": [...]}
//	group BOOTSTRAP TOPIC GROUP COUNT
//	    consume in consumer group GROUP until COUNT records came, commit, and
//	    fetch the committed offsets back
//	    -> {"records", "assigned": [partitions], "committed": {"p": offset}}
//	members BOOTSTRAP TOPIC GROUP PARTITIONS N                  (franz)
//	    start N members of GROUP one after another, each once the group
//	    is balanced, until all N own partitions and together own each once
//	    (cooperative-sticky, so rebalances are incremental)
//	    -> {"owned": [[partitions of member 0], ...]}
//	commit BOOTSTRAP GROUP TOPIC [P=OFFSET...]
//	    commit offsets for a group without members (franz: none given, none
//	    committed) and fetch them back -> {"committed": {"p": offset}}
//	offsets BOOTSTRAP TOPIC PARTITIONS MILLIS
//	    -> {"start", "end", "after": {"p": offset}} (after: the first offset
//	    with a timestamp >= MILLIS, -1 when none)
//	describe BOOTSTRAP TOPIC -> {"configs": {name: value}, "synonyms" (franz):
//	    {name: [[broker or topic key, value, source]]}}
//	producers BOOTSTRAP TOPIC                                   (franz)
//	    DescribeProducers -> {"producers": {"p": [{"producer_id", "epoch",
//	    "last_sequence", "last_timestamp", "txn_start"}]}}
//	delete BOOTSTRAP TOPIC -> {"error": null|"..."}
//	txn BOOTSTRAP TOPIC TXN_ID RECORDS.json commit|abort|open   (franz)
//	    one transaction holding the records, ended as asked; open: the
//	    producers described while it is open, then it is aborted
//	    -> {"acks": [...], "producers": (as producers prints)}
//	transact BOOTSTRAP IN OUT GROUP TXN_ID COUNT                (franz)
//	    consume IN in GROUP and copy each record to OUT in transactions
//	    that carry the consumed offsets (GroupTransactSession)
//	    -> {"copied": COUNT, "committed": {"p": offset}}
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// chunk is how many records one produce call sends, so every partition gets
// several batches.
const chunk = 50

// deadline bounds every command: a client that hangs fails the test.
const deadline = 60 * time.Second

// record is one record as the tests write and read it.
type record struct {
	Partition int32    `json:"partition"`
	Offset    int64    `json:"offset"`
	Timestamp *int64   `json:"timestamp"`
	Key       []byte   `json:"key"`
	Value     []byte   `json:"value"`
	Headers   []header `json:"headers"`
}

// header is [name, value] in JSON: the name a string, the value base64 or
// null (distinct from empty).
type header struct {
	Name  string
	Value []byte
}

func (h header) MarshalJSON() ([]byte, error) {
	return json.Marshal([]any{h.Name, h.Value})
}

func (h *header) UnmarshalJSON(data []byte) error {
	var pair []json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil {
		return err
	}
	if len(pair) != 2 {
		return fmt.Errorf("header %s is not [name, value]", data)
	}
	if err := json.Unmarshal(pair[0], &h.Name); err != nil {
		return err
	}
	return json.Unmarshal(pair[1], &h.Value)
}

type command func(ctx context.Context, args []string) (any, error)

func main() {
	if len(os.Args) < 3 {
		fail("usage: goclients franz|sarama COMMAND ARGS...")
	}
	var table map[string]command
	switch os.Args[1] {
	case "franz":
		table = franzCommands
	case "sarama":
		table = saramaCommands
	default:
		fail("unknown client %q", os.Args[1])
	}
	cmd, ok := table[os.Args[2]]
	if !ok {
		fail("%s has no command %q", os.Args[1], os.Args[2])
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	out, err := cmd(ctx, os.Args[3:])
	if err != nil {
		fail("%s %s: %v", os.Args[1], os.Args[2], err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("writing the result: %v", err)
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "goclients: "+format+"\n", args...)
	os.Exit(1)
}

// wantArgs checks the positional argument count.
func wantArgs(args []string, n int, usage string) error {
	if len(args) < n {
		return fmt.Errorf("usage: %s", usage)
	}
	return nil
}

func atoi32(s string) (int32, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	return int32(n), err
}

// parseCreate reads create's arguments: BOOTSTRAP TOPIC PARTITIONS [KEY=VALUE...].
func parseCreate(args []string) (bootstrap, topic string, partitions int32, configs map[string]*string, err error) {
	if err = wantArgs(args, 3, "create BOOTSTRAP TOPIC PARTITIONS [KEY=VALUE...]"); err != nil {
		return
	}
	bootstrap, topic = args[0], args[1]
	if partitions, err = atoi32(args[2]); err != nil {
		return
	}
	kv, err := keyValues(args[3:])
	configs = make(map[string]*string, len(kv))
	for k, v := range kv {
		configs[k] = &v
	}
	return
}

// produceArgs: produce [-acks all|leader] [-idempotent=BOOL] BOOTSTRAP TOPIC CODEC RECORDS.json
type produceArgs struct {
	leaderAcks bool // acks=1 rather than acks=all
	idempotent bool
	bootstrap  string
	topic      string
	codec      string
	records    []record
}

// parseProduce reads produce's arguments; idempotent is the client's default.
func parseProduce(args []string, idempotent bool) (produceArgs, error) {
	var pa produceArgs
	fs := flag.NewFlagSet("produce", flag.ContinueOnError)
	acks := fs.String("acks", "all", "all or leader")
	fs.BoolVar(&pa.idempotent, "idempotent", idempotent, "idempotent producer")
	if err := fs.Parse(args); err != nil {
		return pa, err
	}
	args = fs.Args()
	if err := wantArgs(args, 4, "produce [-acks all|leader] [-idempotent=BOOL] BOOTSTRAP TOPIC CODEC RECORDS.json"); err != nil {
		return pa, err
	}
	if *acks != "all" && *acks != "leader" {
		return pa, fmt.Errorf("-acks %q: want all or leader", *acks)
	}
	pa.leaderAcks = *acks == "leader"
	pa.bootstrap, pa.topic, pa.codec = args[0], args[1], args[2]
	var err error
	pa.records, err = readRecords(args[3])
	return pa, err
}

// consumeArgs: consume [-read-committed] BOOTSTRAP TOPIC PARTITIONS COUNT
type consumeArgs struct {
	readCommitted bool
	bootstrap     string
	topic         string
	partitions    int32
	count         int
}

func parseConsume(args []string) (consumeArgs, error) {
	var ca consumeArgs
	fs := flag.NewFlagSet("consume", flag.ContinueOnError)
	fs.BoolVar(&ca.readCommitted, "read-committed", false, "isolation level read_committed")
	if err := fs.Parse(args); err != nil {
		return ca, err
	}
	args = fs.Args()
	if err := wantArgs(args, 4, "consume [-read-committed] BOOTSTRAP TOPIC PARTITIONS COUNT"); err != nil {
		return ca, err
	}
	ca.bootstrap, ca.topic = args[0], args[1]
	var err error
	if ca.partitions, err = atoi32(args[2]); err != nil {
		return ca, err
	}
	ca.count, err = strconv.Atoi(args[3])
	return ca, err
}

func readRecords(path string) ([]record, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var recs []record
	return recs, json.Unmarshal(data, &recs)
}

// keyValues parses KEY=VALUE arguments.
func keyValues(args []string) (map[string]string, error) {
	kv := make(map[string]string, len(args))
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not KEY=VALUE", a)
		}
		kv[k] = v
	}
	return kv, nil
}

// partitionOffsets parses P=OFFSET arguments.
func partitionOffsets(args []string) (map[int32]int64, error) {
	kv, err := keyValues(args)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64, len(kv))
	for k, v := range kv {
		p, err := atoi32(k)
		if err != nil {
			return nil, err
		}
		if out[p], err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errText is null in JSON for a nil error.
func errText(err error) *string {
	if err == nil {
		return nil
	}
	s := err.Error()
	return &s
}

// byPartition renders per-partition offsets with string keys, as JSON needs.
func byPartition(m map[int32]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for p, o := range m {
		out[strconv.Itoa(int(p))] = o
	}
	return out
}
