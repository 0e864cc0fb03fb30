package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"testing"
)

// TestPartitionsScenario runs the partitions scenario small on the broker
// of $ACEMQ_AMQP_URL and reads its JSON: a row per queue type and
// layout, every partition given messages, the partitioned layouts' ratio
// to the plain queue, the four-partition target judged. The run itself
// fails if any message was lost, handled twice or handled from another
// partition than its key's.
func TestPartitionsScenario(t *testing.T) {
	url := brokerURL(t)
	var out bytes.Buffer
	args := []string{"-amqp", url, "-scenarios", "partitions", "-systems", "acemq", "-rounds", "2",
		"-partition-n", "400", "-partition-publishers", "2", "-publishers", "8", "-json", "-q"}
	if err := run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	rows := map[string]row{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Partitions != nil {
			rows[r.Partitions.QueueType+"/"+r.Partitions.Layout] = r
		}
	}
	for _, qt := range []string{"quorum", "classic"} {
		for _, l := range []struct {
			layout string
			count  int
		}{{"queue", 0}, {"p1", 1}, {"p2", 2}, {"p4", 4}} {
			r, ok := rows[qt+"/"+l.layout]
			if !ok {
				t.Errorf("no row for %s %s in %s", qt, l.layout, out.String())
				continue
			}
			p := r.Partitions
			if r.Rounds != 2 || r.N != 400 || p.MsgsPerS.Median <= 0 || p.Nodes != 1 || len(p.PerQueue) != 2 {
				t.Errorf("%s %s: %+v %+v", qt, l.layout, r, *p)
				continue
			}
			for _, counts := range p.PerQueue {
				sum := 0
				for _, c := range counts {
					if c == 0 {
						t.Errorf("%s %s: a partition handled nothing: %v", qt, l.layout, counts)
					}
					sum += c
				}
				if len(counts) != max(l.count, 1) || sum != 400 {
					t.Errorf("%s %s: per queue %v, want %d queues summing to 400", qt, l.layout, counts, max(l.count, 1))
				}
			}
			if (p.VsQueue != nil) != (l.count > 0) || (p.TargetMet != nil) != (l.count == 4) {
				t.Errorf("%s %s: ratio %v, target %v", qt, l.layout, p.VsQueue, p.TargetMet)
			}
		}
	}
}

// TestPartitionTally: each index counted once, from the partition its
// key hashes to; a duplicate and an id not of the run are errors, the
// untimed publishes past n are counted apart.
func TestPartitionTally(t *testing.T) {
	tally := newPartitionTally(3, 2)
	if err := tally.check(); err != nil {
		t.Fatalf("fresh tally: %v", err)
	}
	tally.seen[0].Store(true)
	if tally.seen[0].Swap(true) {
		tally.dups.Add(1)
	}
	tally.alien.Add(1)
	tally.misrouted.Add(1)
	err := tally.check()
	if err == nil {
		t.Fatal("a duplicate, a misrouted and an alien message passed the check")
	}
	for _, want := range []string{"handled twice", "does not hash to", "not one of the run's"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("check: %v, want it to say %q", err, want)
		}
	}
}
