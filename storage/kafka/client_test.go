package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClientMetrics: every client exports franz-go's metrics (kprom) as
// endcap_kafka_client_* labelled with its client id, and a second client
// with the same id (several systems in one process) neither fails nor
// panics.
func TestClientMetrics(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var clients []*kgo.Client
	for range 2 {
		cl, err := NewClient(c.ListenAddrs(), nil, kgo.ClientID("endcap-metrics-test"), kgo.DefaultProduceTopic("t"))
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := clients[0].ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() != "endcap_kafka_client_produce_records_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "client_id" && l.GetValue() == "endcap-metrics-test" && m.GetCounter().GetValue() >= 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("no endcap_kafka_client_produce_records_total{client_id=\"endcap-metrics-test\"} after a produce")
	}
	for _, cl := range clients {
		cl.Close()
	}
}
