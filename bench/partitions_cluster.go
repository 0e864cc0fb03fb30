package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	neturl "net/url"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
)

// The partitions scenario on a cluster: -partition-urls names a running
// cluster's nodes, or -partition-cluster N starts a private one of N nodes
// on this machine the way the fault suite does (internal/brokertest:
// rabbitmq-server -detached on free ports, data in a temporary directory,
// the others joined to the first) and stops it, its data removed, when
// the run ends. A watchdog of brokertest's stops the nodes too if the
// bench is killed.

// startPartitionCluster starts n private nodes as a cluster and points
// the run at them: the partitions scenario's URLs, the first node for
// everything else, the placement read through it. stop stops them all.
func startPartitionCluster(cfg *config, n int, progress io.Writer) (stop func(), err error) {
	fmt.Fprintf(progress, "starting a private cluster of %d nodes (internal/brokertest)\n", n)
	began := time.Now()
	nodes, err := brokertest.StartCluster(n)
	if err != nil {
		return nil, fmt.Errorf("start a cluster of %d nodes: %w", n, err)
	}
	stop = func() {
		for _, nd := range nodes {
			nd.Stop()
		}
		fmt.Fprintf(progress, "stopped the private cluster's %d nodes, their data removed\n", n)
	}
	cfg.partitionURLs = nil
	var names []string
	for _, nd := range nodes {
		cfg.partitionURLs = append(cfg.partitionURLs, nd.URL)
		names = append(names, nd.Name)
	}
	cfg.url = nodes[0].URL
	cfg.partitionNode = nodes[0].Name
	cfg.partitionPlacement = true
	fmt.Fprintf(progress, "cluster up in %.0f s: %s\n", time.Since(began).Seconds(), strings.Join(names, ", "))
	return stop, nil
}

// queueLeaders asks rabbitmqctl which node leads each queue (its
// "leader" info item; for a classic queue, the node it lives on).
func queueLeaders(ctx context.Context, cfg config, queues []string) ([]string, error) {
	vhost := "/"
	if u, err := neturl.Parse(partitionURLs(cfg)[0]); err == nil && strings.TrimPrefix(u.Path, "/") != "" {
		vhost = strings.TrimPrefix(u.Path, "/")
	}
	args := []string{"-q"}
	if cfg.partitionNode != "" {
		args = append(args, "-n", cfg.partitionNode)
	}
	args = append(args, "list_queues", "-p", vhost, "name", "leader", "--formatter", "json")
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "rabbitmqctl", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("rabbitmqctl list_queues: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var rows []struct {
		Name   string `json:"name"`
		Leader string `json:"leader"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("rabbitmqctl list_queues: %w", err)
	}
	leaders := make([]string, len(queues))
	for _, r := range rows {
		if i := slices.Index(queues, r.Name); i >= 0 {
			leaders[i] = r.Leader
		}
	}
	return leaders, nil
}
