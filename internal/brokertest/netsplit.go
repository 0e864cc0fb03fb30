package brokertest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// NetsplitOptions are the settings that decide what a cluster does when
// its network splits.
type NetsplitOptions struct {
	// PartitionHandling is the nodes' cluster_partition_handling:
	// "pause_minority" when empty ("ignore", "autoheal" are the others).
	PartitionHandling string
	// NetTicktime is the nodes' net_ticktime: 10 s when zero (RabbitMQ's
	// default, 60 s, would take a minute or more to see a partition). A
	// node sees another as gone after 1 to 1.25 times this.
	NetTicktime time.Duration
}

// Netsplit is a cluster of private nodes whose Erlang distribution
// traffic can be cut at the network level, both ways or one way, and
// healed, while the AMQP ports and rabbitmqctl keep working.
//
// How: node i opens its distribution connections from an address of its
// own on the loopback network (kernel's inet_dist_connect_options {ip,
// ...}) and listens on its own fixed distribution port (RABBITMQ_DIST_PORT).
// A connection between two nodes is then always "from node X's address to
// node Y's port", so that iptables rules in a chain of this Netsplit,
// jumped to from OUTPUT, drop exactly the packets one node sends another
// (X's own on a connection it opened, and its replies on one the other
// opened) and nothing else: not rabbitmqctl (from 127.0.0.1), not epmd,
// not the clients. Heal flushes the chain; Stop removes it, and a
// watchdog removes it too if the test binary dies first.
type Netsplit struct {
	Nodes []*Node

	addrs []string // node i's source address
	dist  []int    // node i's distribution port
	chain string

	mu   sync.Mutex
	cuts map[[2]int]bool // from, to: the packets from node from to node to are dropped
}

// StartNetsplitCluster starts n private nodes as StartCluster does, with
// the settings of o and what Netsplit needs to cut them apart. It needs
// iptables (scripts/test installs it) and CAP_NET_ADMIN. Stop it with Stop.
func StartNetsplitCluster(n int, o NetsplitOptions) (*Netsplit, error) {
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil, fmt.Errorf("netsplit needs iptables (scripts/test installs it): %w", err)
	}
	if o.PartitionHandling == "" {
		o.PartitionHandling = "pause_minority"
	}
	if o.NetTicktime == 0 {
		o.NetTicktime = 10 * time.Second
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	s := &Netsplit{
		addrs: make([]string, n),
		dist:  make([]int, n),
		chain: fmt.Sprintf("acemq-ns-%d-%x", os.Getpid(), b),
		cuts:  map[[2]int]bool{},
	}
	// 127.A.B.i+1, A and B drawn for this cluster: the whole of
	// 127.0.0.0/8 is on the loopback interface.
	for i := range s.addrs {
		s.addrs[i] = fmt.Sprintf("127.%d.%d.%d", 1+b[0]%250, 1+b[1]%250, i+1)
	}
	if err := s.iptables("-N", s.chain); err != nil {
		return nil, err
	}
	watchdog(fmt.Sprintf("iptables -w -D OUTPUT -j %[1]s; iptables -w -F %[1]s; iptables -w -X %[1]s", s.chain))
	if err := s.iptables("-I", "OUTPUT", "-j", s.chain); err != nil {
		s.removeChain()
		return nil, err
	}
	nodes, err := startCluster(n, func(i int, dir string) ([]string, error) {
		ip := strings.ReplaceAll(s.addrs[i], ".", ",")
		conf := fmt.Sprintf("[{kernel, [{inet_dist_connect_options, [{ip, {%s}}]}, {net_ticktime, %d}]},\n {rabbit, [{cluster_partition_handling, %s}]}].\n",
			ip, int(o.NetTicktime.Seconds()), o.PartitionHandling)
		path := filepath.Join(dir, "advanced.config")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		return []string{"RABBITMQ_ADVANCED_CONFIG_FILE=" + path}, nil
	})
	if err != nil {
		s.removeChain()
		return nil, err
	}
	s.Nodes = nodes
	for i, nd := range nodes {
		if s.dist[i], err = nd.distPort(); err != nil {
			s.Stop()
			return nil, err
		}
	}
	return s, nil
}

// distPort is the node's RABBITMQ_DIST_PORT.
func (n *Node) distPort() (int, error) {
	for _, kv := range slices.Backward(n.env) {
		if v, ok := strings.CutPrefix(kv, "RABBITMQ_DIST_PORT="); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("the node has no RABBITMQ_DIST_PORT")
}

// Isolate cuts node i from every other node, both ways.
func (s *Netsplit) Isolate(tb testing.TB, i int) {
	tb.Helper()
	for k := range s.Nodes {
		if k != i {
			s.Drop(tb, i, k)
			s.Drop(tb, k, i)
		}
	}
}

// IsolateOneWay drops what node i sends to every other node, and lets
// through what they send it.
func (s *Netsplit) IsolateOneWay(tb testing.TB, i int) {
	tb.Helper()
	for k := range s.Nodes {
		if k != i {
			s.Drop(tb, i, k)
		}
	}
}

// Drop drops every packet node from sends node to over the distribution
// (one direction; TCP on the other then gets no acknowledgements).
func (s *Netsplit) Drop(tb testing.TB, from, to int) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cuts[[2]int{from, to}] {
		return
	}
	for _, rule := range [][]string{
		// On a connection from opened: its packets to to's port.
		{"-s", s.addrs[from], "-p", "tcp", "--dport", strconv.Itoa(s.dist[to])},
		// On a connection to opened: from's replies, from its port.
		{"-d", s.addrs[to], "-p", "tcp", "--sport", strconv.Itoa(s.dist[from])},
	} {
		if err := s.iptables(append(append([]string{"-A", s.chain}, rule...), "-j", "DROP")...); err != nil {
			tb.Fatalf("netsplit: drop %s -> %s: %v", s.Nodes[from].Name, s.Nodes[to].Name, err)
		}
	}
	s.cuts[[2]int{from, to}] = true
}

// Heal removes every cut.
func (s *Netsplit) Heal(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.iptables("-F", s.chain); err != nil {
		tb.Fatalf("netsplit: heal: %v", err)
	}
	clear(s.cuts)
}

// Rules is the chain's rules as iptables lists them (for a test's log).
func (s *Netsplit) Rules() string {
	out, err := exec.Command("iptables", "-w", "-S", s.chain).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("iptables -S %s: %v: %s", s.chain, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out))
}

// Stop removes the rules and stops the nodes.
func (s *Netsplit) Stop() {
	s.removeChain()
	for _, nd := range s.Nodes {
		nd.Stop()
	}
}

func (s *Netsplit) removeChain() {
	_ = s.iptables("-D", "OUTPUT", "-j", s.chain)
	_ = s.iptables("-F", s.chain)
	_ = s.iptables("-X", s.chain)
}

func (s *Netsplit) iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ClusterView is what one node says of the cluster (rabbitmqctl
// cluster_status): the nodes it runs with and the partitions it has seen,
// or that it is paused (pause_minority stopped its RabbitMQ application,
// and cluster_status does not answer then).
type ClusterView struct {
	Running    []string            `json:"running_nodes"`
	Partitions map[string][]string `json:"partitions"`
	Paused     bool                `json:"-"`
}

// Split reports whether the node has seen a partition not yet healed.
func (v ClusterView) Split() bool { return len(v.Partitions) > 0 }

// View asks node i for its ClusterView. A node paused by pause_minority
// still answers (its Erlang VM runs). It fails only when rabbitmqctl
// cannot get an answer.
func (s *Netsplit) View(i int) (ClusterView, error) {
	out, err := ctl(s.Nodes[i].Name, 30*time.Second, "cluster_status", "--formatter", "json")
	if err != nil {
		if strings.Contains(out, "requires the 'rabbit' app to be running") {
			return ClusterView{Paused: true}, nil
		}
		return ClusterView{}, err
	}
	var v ClusterView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return ClusterView{}, fmt.Errorf("cluster_status of %s: %w: %s", s.Nodes[i].Name, err, out)
	}
	return v, nil
}

// Describe is every node's view, one line each, for a test's log.
func (s *Netsplit) Describe() string {
	var lines []string
	for i, nd := range s.Nodes {
		v, err := s.View(i)
		if err != nil {
			lines = append(lines, fmt.Sprintf("%s: %v", nd.Name, err))
			continue
		}
		if v.Paused {
			lines = append(lines, nd.Name+": paused (its RabbitMQ application is stopped)")
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: running %v, partitions %v", nd.Name, v.Running, v.Partitions))
	}
	return strings.Join(lines, "\n")
}

// Whole reports whether every node runs with every other and none reports
// a partition.
func (s *Netsplit) Whole() bool { return s.NotWhole() == "" }

// NotWhole says why the cluster is not whole, the first node's view that
// is not, or "" when it is.
func (s *Netsplit) NotWhole() string {
	for i, nd := range s.Nodes {
		v, err := s.View(i)
		switch {
		case err != nil:
			return fmt.Sprintf("%s: %v", nd.Name, err)
		case v.Paused:
			return nd.Name + ": paused"
		case v.Split() || len(v.Running) != len(s.Nodes):
			return fmt.Sprintf("%s: running %v, partitions %v", nd.Name, v.Running, v.Partitions)
		}
	}
	return ""
}

// Running is the names of the nodes whose RabbitMQ application runs
// (a node paused by pause_minority does not), as each says of itself.
func (s *Netsplit) Running() []string {
	var out []string
	for _, nd := range s.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := bounded(exec.CommandContext(ctx, "rabbitmq-diagnostics", "-q", "-n", nd.Name, "check_running")).Run()
		cancel()
		if err == nil || errors.Is(err, exec.ErrWaitDelay) {
			out = append(out, nd.Name)
		}
	}
	return out
}
