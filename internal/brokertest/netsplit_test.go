package brokertest_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/polltest"
)

// TestNetsplit: a three-node cluster under pause_minority with a 10 s
// net_ticktime. Node 2 cut from the other two, both ways, is seen as gone
// by the majority and pauses itself, and the cluster is whole again once
// the cut is healed; the same with node 2's packets dropped one way only.
// The rules are gone after Heal, and the chain after Stop. Between cuts
// rabbitmqctl reaches every node, the cut one included.
func TestNetsplit(t *testing.T) {
	brokertest.SharedURL(t) // the same gating as every integration test
	start := time.Now()
	s, err := brokertest.StartNetsplitCluster(3, brokertest.NetsplitOptions{})
	if err != nil {
		t.Fatalf("start a three-node cluster that can split: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	t.Logf("the cluster started in %s", time.Since(start).Round(time.Millisecond))
	for i, nd := range s.Nodes {
		if got := strings.TrimSpace(nd.Ctl(t, "eval", "net_kernel:get_net_ticktime().")); got != "10" {
			t.Errorf("node %d: net_ticktime %s, want 10", i, got)
		}
		if got := strings.TrimSpace(nd.Ctl(t, "eval", "application:get_env(rabbit, cluster_partition_handling).")); got != "{ok,pause_minority}" {
			t.Errorf("node %d: cluster_partition_handling %s, want {ok,pause_minority}", i, got)
		}
	}
	polltest.Within(t, 60*time.Second, "the cluster whole", s.Whole)

	for _, cut := range []struct {
		name string
		do   func(tb testing.TB, i int)
	}{
		{"both ways", s.Isolate},
		{"one way", s.IsolateOneWay},
	} {
		cutAt := time.Now()
		cut.do(t, 2)
		t.Logf("%s: rules:\n%s", cut.name, s.Rules())
		victim := s.Nodes[2].Name
		polltest.Within(t, 90*time.Second, cut.name+": node 0 sees node 2 gone and node 2 paused", func() bool {
			v, err := s.View(0)
			return err == nil && len(v.Running) == 2 && !slices.Contains(v.Running, victim) &&
				!slices.Contains(s.Running(), victim)
		})
		t.Logf("%s: seen %s after the cut:\n%s", cut.name, time.Since(cutAt).Round(time.Millisecond), s.Describe())
		if v, err := s.View(2); err != nil || !v.Paused {
			t.Errorf("%s: node 2 says %+v, %v; want it paused", cut.name, v, err)
		}
		healAt := time.Now()
		s.Heal(t)
		if rules := s.Rules(); strings.Contains(rules, "DROP") {
			t.Errorf("%s: rules left after Heal:\n%s", cut.name, rules)
		}
		polltest.Within(t, 120*time.Second, cut.name+": the cluster whole again", func() bool {
			return s.Whole() && len(s.Running()) == 3
		})
		t.Logf("%s: whole %s after the heal:\n%s", cut.name, time.Since(healAt).Round(time.Millisecond), s.Describe())
	}

	chain := strings.Fields(s.Rules())[1] // "-N acemq-ns-..."
	s.Stop()
	stopped = true
	out, err := exec.Command("iptables", "-w", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v: %s", err, out)
	}
	if strings.Contains(string(out), chain) {
		t.Errorf("the chain %s is left after Stop:\n%s", chain, out)
	}
}
