package triage_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq/internal/triage"
)

func TestKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ reason, want, kind string }{
		{"exhausted 5 attempts: the warehouse is not answering", "exhausted <n> attempts: the warehouse is not answering", "exhausted"},
		{"exhausted 3 attempts: POST https://wh.internal/v1/reserve: HTTP 503", "exhausted <n> attempts: POST https://wh.internal/v<n>/reserve: HTTP 503", "exhausted"},
		{"exhausted 3 attempts: status 404 for order 88123", "exhausted <n> attempts: status 404 for order <n>", "exhausted"},
		{"exhausted 5 attempts: dial tcp 10.0.3.17:5432: connect: connection refused", "exhausted <n> attempts: dial tcp <n>:<n>: connect: connection refused", "exhausted"},
		{"exhausted 5 attempts: context deadline exceeded after 30.5s", "exhausted <n> attempts: context deadline exceeded after <n>s", "exhausted"},
		{`the handler rejected it: no such customer "c-1042"`, `the handler rejected it: no such customer "<q>"`, "rejected"},
		{"the handler rejected it: no such customer 'c-77'", "the handler rejected it: no such customer '<q>'", "rejected"},
		{"the handler rejected it: can't charge card 4242: declined", "the handler rejected it: can't charge card <n>: declined", "rejected"},
		{"the handler rejected it: order 7c1e9a52-3f0b-4c1d-9e2a-1b2c3d4e5f60 already shipped", "the handler rejected it: order <uuid> already shipped", "rejected"},
		{"the handler parked it: schema v9 is unknown here", "the handler parked it: schema v<n> is unknown here", "parked"},
		{"could not be decoded: invalid character 'x' looking for beginning of value", "could not be decoded: invalid character '<q>' looking for beginning of value", "undecodable"},
		{"could not be decoded: json: cannot unmarshal string into Go struct field Order.total of type int64", "could not be decoded: json: cannot unmarshal string into Go struct field Order.total of type int<n>", "undecodable"},
		{"exceeded the maximum message age of 6h0m0s: the warehouse is not answering", "exceeded the maximum message age of <n>h<n>m<n>s: the warehouse is not answering", "max-age"},
		{"exhausted 5 attempts: lock held by txn 0x7f3a9c, sha deadbeef01", "exhausted <n> attempts: lock held by txn <hex>, sha <hex>", "exhausted"},
		{"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)", "the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)", "broker"},
		{"the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected, 3 times)", "the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected, <n> times)", "broker"},
		{"the broker dead-lettered it from queue orders: it expired, having waited there longer than its time to live (expired)", "the broker dead-lettered it from queue orders: it expired, having waited there longer than its time to live (expired)", "broker"},
		{"could not be written: the headers are 140000 bytes, over the limit of 129024; parked with only the acemq headers, instead of a retry", "could not be written: the headers are <n> bytes, over the limit of <n>; parked with only the acemq headers, instead of a retry", "unwritable"},
		{"retry requested but no retry policy is set, so one delivery is all it gets: busy", "retry requested but no retry policy is set, so one delivery is all it gets: busy", "no-policy"},
		{"the handler ran past its timeout of 30s and the broker delivered the message again (its consumer_timeout closed the channel?), so it is not run again", "the handler ran past its timeout of <n>s and the broker delivered the message again (its consumer_timeout closed the channel?), so it is not run again", "timeout"},
		{"  spaced\n\tout  ", "spaced out", "other"},
		{"", triage.NoReason, "none"},
	} {
		if got := triage.Key(c.reason); got != c.want {
			t.Errorf("Key(%q)\n = %q\nwant %q", c.reason, got, c.want)
		}
		if got := triage.Kind(c.reason); got != c.kind {
			t.Errorf("Kind(%q) = %q, want %q", c.reason, got, c.kind)
		}
	}
}

func TestGrouper(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var g triage.Grouper
	add := func(id, reason string, attempt int, created time.Duration) {
		g.Add(triage.Message{ID: id, Reason: reason, Attempt: attempt, Created: base.Add(created), Body: []byte("{}")})
	}
	add("m-1", "exhausted 5 attempts: POST /reserve/881: HTTP 503", 5, 0)
	add("m-2", `the handler rejected it: no such customer "c-1"`, 1, time.Minute)
	add("m-3", "exhausted 5 attempts: POST /reserve/912: HTTP 503", 5, 2*time.Minute)
	add("m-4", "exhausted 3 attempts: POST /reserve/913: HTTP 503", 3, -time.Hour)
	add("m-5", "exhausted 5 attempts: POST /reserve/914: HTTP 404", 5, 0)
	add("m-6", `the handler rejected it: no such customer "c-2"`, 1, time.Hour)
	g.Add(triage.Message{ID: "m-7", Reason: "the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)",
		Attempt: 2, DeadLettered: base.Add(3 * time.Hour)})
	groups := g.Groups()
	if g.Total() != 7 || len(groups) != 4 {
		t.Fatalf("%d messages in %d groups: %+v", g.Total(), len(groups), groups)
	}
	first := groups[0]
	if first.Count != 3 || first.Kind != "exhausted" || first.MinAttempt != 3 || first.MaxAttempt != 5 || first.SampleID != "m-1" ||
		!first.FirstCreated.Equal(base.Add(-time.Hour)) || !first.LastCreated.Equal(base.Add(2*time.Minute)) || first.FirstDeadLettered != nil {
		t.Errorf("first group: %+v", first)
	}
	if first.ID != triage.ID(first.Key) || len(first.ID) != 9 || !triage.Matches(first.ID, "exhausted 9 attempts: POST /reserve/1: HTTP 503") ||
		triage.Matches(first.ID, "exhausted 9 attempts: POST /reserve/1: HTTP 404") || !triage.Matches(first.Key, "exhausted 2 attempts: POST /reserve/2: HTTP 503") {
		t.Errorf("matching %s %q", first.ID, first.Key)
	}
	if second := groups[1]; second.Count != 2 || second.Kind != "rejected" || second.SampleID != "m-2" {
		t.Errorf("second group: %+v", second)
	}
	if last := groups[3]; last.Kind != "broker" && groups[2].Kind != "broker" {
		t.Errorf("no broker group: %+v", groups)
	}
	for _, gr := range groups {
		if gr.Kind == "broker" && (gr.FirstDeadLettered == nil || !gr.FirstDeadLettered.Equal(base.Add(3*time.Hour)) || gr.FirstCreated != nil) {
			t.Errorf("broker group: %+v", gr)
		}
	}
}

// FuzzKey: any reason is in the group its key names, by id and by key.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"", "exhausted 5 attempts: x", `rejected: "a\"b" 'c' ` + "`d`", "0xff deadbeef01 7c1e9a52-3f0b-4c1d-9e2a-1b2c3d4e5f60", "HTTP 503 status=404 code 99", "1.2.3,4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, reason string) {
		key := triage.Key(reason)
		if !triage.Matches(triage.ID(key), reason) || !triage.Matches(key, reason) {
			t.Errorf("%q is not in its own group %q", reason, key)
		}
	})
}

// TestGrouperQueues: messages read from several queues (the partitions'
// .dlq of a partitioned queue) are grouped together by reason, and each
// group says how many each queue holds, in the order first read, and the
// sample's queue.
func TestGrouperQueues(t *testing.T) {
	t.Parallel()
	var g triage.Grouper
	for _, m := range []struct{ id, reason, queue string }{
		{"m-1", "exhausted 5 attempts: HTTP 503", "orders.p0.dlq"},
		{"m-2", "the broker dead-lettered it from queue orders.p1: a consumer rejected it without requeueing it (rejected)", "orders.p1.dlq"},
		{"m-3", "exhausted 5 attempts: HTTP 503", "orders.p1.dlq"},
		{"m-4", "exhausted 5 attempts: HTTP 503", "orders.p1.dlq"},
		{"m-5", "the broker dead-lettered it from queue orders.p2: a consumer rejected it without requeueing it (rejected)", "orders.p2.dlq"},
		{"m-6", "exhausted 5 attempts: HTTP 503", "orders.p0.dlq"},
	} {
		g.Add(triage.Message{ID: m.id, Reason: m.reason, Attempt: 5, Queue: m.queue})
	}
	groups := g.Groups()
	if len(groups) != 2 {
		t.Fatalf("%d groups: %+v", len(groups), groups)
	}
	want := []triage.QueueCount{{Queue: "orders.p0.dlq", Count: 2}, {Queue: "orders.p1.dlq", Count: 2}}
	if e := groups[0]; e.Count != 4 || e.SampleQueue != "orders.p0.dlq" || len(e.Queues) != 2 || e.Queues[0] != want[0] || e.Queues[1] != want[1] {
		t.Errorf("exhausted: %+v", e)
	}
	// The broker names the partition it dead-lettered from: a number,
	// taken out like any other.
	if b := groups[1]; b.Count != 2 || b.SampleQueue != "orders.p1.dlq" || len(b.Queues) != 2 || b.Key != "the broker dead-lettered it from queue orders.p<n>: a consumer rejected it without requeueing it (rejected)" {
		t.Errorf("broker: %+v", b)
	}
	// Read from one queue, a group names none.
	var one triage.Grouper
	one.Add(triage.Message{ID: "m-1", Reason: "x"})
	if gr := one.Groups()[0]; gr.Queues != nil || gr.SampleQueue != "" {
		t.Errorf("%+v", gr)
	}
}
