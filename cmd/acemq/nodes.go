package main

import (
	"context"
	"strings"

	"github.com/acemq/acemq/internal/amqpconn"
)

// nodeURLs is a repeatable --node URL: further nodes of the cluster --url
// is a node of, which the connection may use (rabbitmq.WithURLs); a
// command that declares a partitioned queue declares each partition
// through its own node of them all (transport.Queue.Home).
type nodeURLs []string

func (n *nodeURLs) String() string { return strings.Join(*n, ",") }

// Set checks the URL as --url is checked; its password is redacted from
// every output, as any argument's is.
func (n *nodeURLs) Set(s string) error {
	if err := amqpconn.CheckURL(s); err != nil {
		return err
	}
	*n = append(*n, s)
	return nil
}

type nodesKey struct{}

// withNodes carries the further nodes to the dialer, as withTLS carries
// the TLS configuration.
func withNodes(ctx context.Context, nodes []string) context.Context {
	if len(nodes) == 0 {
		return ctx
	}
	return context.WithValue(ctx, nodesKey{}, nodes)
}

// nodesFrom is what withNodes put in ctx, or none.
func nodesFrom(ctx context.Context) []string {
	nodes, _ := ctx.Value(nodesKey{}).([]string)
	return nodes
}
