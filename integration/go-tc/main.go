// tcgo: testcontainers-go's Kafka module (modules/kafka) on the Runnel image,
// unmodified: kafka.Run starts the container with the module's own start
// script (Confluent contract), then franz-go produces and consumes through
// the published port. Prints one JSON object; exits non-zero on failure.
//
//	tcgo IMAGE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go/modules/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

type result struct {
	Brokers  []string `json:"brokers"`
	Produced int      `json:"produced"`
	Consumed []string `json:"consumed"`
	StartMs  int64    `json:"start_ms"`
}

// The container, removed on every way out (fail exits without deferred calls).
var ctr *kafka.KafkaContainer

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "tcgo: "+format+"\n", args...)
	terminate()
	os.Exit(1)
}

func terminate() {
	if ctr != nil {
		_ = ctr.Terminate(context.Background())
		ctr = nil
	}
}

func roundtrip(ctx context.Context, brokers []string, topic string, n int) []string {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.AllowAutoTopicCreation())
	if err != nil {
		fail("client: %v", err)
	}
	defer cl.Close()
	for i := 0; i < n; i++ {
		rec := &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("tc-go-%d", i))}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			fail("produce: %v", err)
		}
	}
	var got []string
	for len(got) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: tcgo IMAGE")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	t0 := time.Now()
	var err error
	ctr, err = kafka.Run(ctx, os.Args[1])
	defer terminate()
	if err != nil {
		fail("run: %v", err)
	}
	res := result{StartMs: time.Since(t0).Milliseconds()}
	if res.Brokers, err = ctr.Brokers(ctx); err != nil {
		fail("brokers: %v", err)
	}
	res.Produced = 10
	res.Consumed = roundtrip(ctx, res.Brokers, "tc-go", res.Produced)
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
}
