package faults_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
)

// quorumMembers says, as node n lists them, each quorum queue of qs with
// its leader, members and the members online, the queues that share all
// three said once with their count: what the broker itself says of where
// each queue's Raft group stands, before a partition and after it.
func quorumMembers(tb testing.TB, n *brokertest.Node, qs []string) string {
	tb.Helper()
	by := map[string][]string{} // "leader L, members M, online O" -> queues
	seen := map[string]bool{}
	for _, line := range strings.Split(n.Ctl(tb, "list_queues", "name", "leader", "members", "online", "--no-table-headers"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || !slices.Contains(qs, f[0]) {
			continue
		}
		seen[f[0]] = true
		key := fmt.Sprintf("leader %s, members %s, online %s", f[1], f[2], f[3])
		by[key] = append(by[key], f[0])
	}
	var parts []string
	for key, names := range by {
		who := names[0]
		if len(names) > 1 {
			who = fmt.Sprintf("%s and %d more", names[0], len(names)-1)
		}
		parts = append(parts, fmt.Sprintf("  %s: %s", who, key))
	}
	slices.Sort(parts)
	for _, q := range qs {
		if !seen[q] {
			parts = append(parts, fmt.Sprintf("  %s: not listed (no answer within rabbitmqctl's second)", q))
		}
	}
	return strings.Join(parts, "\n")
}
