package faults_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
)

// startCluster starts the three-node cluster of a cluster scenario, gated
// as every integration test is, logs how long it took, and stops its nodes
// when the test ends.
func startCluster(tb testing.TB, name string) []*brokertest.Node {
	tb.Helper()
	brokertest.SharedURL(tb) // the same gating as every integration test
	start := time.Now()
	nodes, err := brokertest.StartCluster(3)
	if err != nil {
		tb.Fatalf("start a three-node cluster: %v", err)
	}
	tb.Cleanup(func() {
		for _, n := range nodes {
			n.Stop()
		}
	})
	tb.Logf("%s: the cluster started in %s", name, time.Since(start).Round(time.Millisecond))
	return nodes
}
