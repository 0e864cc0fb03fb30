package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// partitionFlags declares the partitions scenario's flags.
func partitionFlags(fs *flag.FlagSet, c *config) {
	fs.IntVar(&c.partitionN, "partition-n", 20000, "partitions scenario: messages per layout run")
	fs.Func("partition-counts", "partitions scenario: the partition counts to measure against one plain queue (default 1,2,4)", func(s string) error {
		c.partitionCounts = nil
		for _, f := range splitList(s) {
			v, err := strconv.Atoi(f)
			if err != nil || v < 1 {
				return fmt.Errorf("%q is not a partition count of at least 1", f)
			}
			c.partitionCounts = append(c.partitionCounts, v)
		}
		return nil
	})
	fs.Func("partition-types", "partitions scenario: the queue types (x-queue-type), each measured on its own (default quorum,classic)", func(s string) error {
		c.partitionTypes = nil
		for _, f := range splitList(s) {
			if f != "quorum" && f != "classic" {
				return fmt.Errorf("%q is not quorum or classic", f)
			}
			c.partitionTypes = append(c.partitionTypes, f)
		}
		return nil
	})
	fs.IntVar(&c.partitionPublishers, "partition-publishers", 4, "partitions scenario: publishers, each with its own transport, -channels, -window and -publishers goroutines")
	fs.Func("partition-urls", "partitions scenario: a cluster's AMQP URLs, one per node, comma-separated: a Server per node and the publishers spread over them (the first URL replaces -amqp)", func(s string) error {
		c.partitionURLs = splitList(s)
		return nil
	})
	fs.IntVar(&c.partitionCluster, "partition-cluster", 0, "partitions scenario: start a private cluster of this many nodes (internal/brokertest; root, rabbitmq-server), run against it and stop it")
	fs.StringVar(&c.partitionNode, "partition-node", os.Getenv("RABBITMQ_NODENAME"), "partitions scenario: the node rabbitmqctl asks for the queues' leaders (default $RABBITMQ_NODENAME)")
	fs.BoolVar(&c.partitionPlacement, "partition-placement", false, "partitions scenario: read each queue's leader after its run with rabbitmqctl (on with several URLs)")
}

// checkPartitionFlags fills the defaults and refuses what cannot run.
func checkPartitionFlags(c *config) error {
	if c.partitionCounts == nil {
		c.partitionCounts = []int{1, 2, 4}
	}
	if c.partitionTypes == nil {
		c.partitionTypes = []string{"quorum", "classic"}
	}
	if c.partitionN < 1 || c.partitionPublishers < 1 || c.partitionCluster < 0 || len(c.partitionCounts) == 0 || len(c.partitionTypes) == 0 {
		return fmt.Errorf("-partition-n and -partition-publishers must be positive, -partition-cluster not negative, and -partition-counts and -partition-types name at least one")
	}
	if c.partitionCluster > 0 && len(c.partitionURLs) > 0 {
		return fmt.Errorf("-partition-cluster starts its own nodes: give it or -partition-urls, not both")
	}
	if len(c.partitionURLs) > 0 {
		c.url = c.partitionURLs[0]
		for _, u := range c.partitionURLs {
			if !strings.HasPrefix(u, "amqp://") && !strings.HasPrefix(u, "amqps://") {
				return fmt.Errorf("-partition-urls: %s is not an AMQP URL", redact(u))
			}
		}
	}
	c.partitionPlacement = c.partitionPlacement || len(c.partitionURLs) > 1 || c.partitionCluster > 1
	return nil
}
