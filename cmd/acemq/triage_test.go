package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/triage"
	"github.com/acemq/acemq/transport"
)

// mixedReasons is a realistic morning's .dlq: the warehouse down (ids and
// counts varying), a missing customer (quoted ids), undecodable bodies,
// and messages the broker dead-lettered itself.
func mixedReasons() (reasons []string, groups map[string]int) {
	groups = map[string]int{}
	add := func(n int, key string, reason func(i int) string) {
		for i := range n {
			reasons = append(reasons, reason(i))
		}
		groups[key] = n
	}
	add(7, "exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503", func(i int) string {
		return fmt.Sprintf("exhausted %d attempts: POST https://wh.internal/reserve/%d: HTTP 503", 3+i%3, 88100+i)
	})
	add(2, "exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 404", func(i int) string {
		return fmt.Sprintf("exhausted 5 attempts: POST https://wh.internal/reserve/%d: HTTP 404", 99000+i)
	})
	add(4, `the handler rejected it: no such customer "<q>"`, func(i int) string {
		return fmt.Sprintf(`the handler rejected it: no such customer "c-%d"`, 1000+i*7)
	})
	add(3, "could not be decoded: invalid character '<q>' looking for beginning of value", func(i int) string {
		return fmt.Sprintf("could not be decoded: invalid character '%c' looking for beginning of value", 'x'+i)
	})
	add(2, "the handler rejected it: order <uuid> already shipped", func(i int) string {
		return fmt.Sprintf("the handler rejected it: order 7c1e9a52-3f0b-4c1d-9e2a-1b2c3d4e5f6%d already shipped", i)
	})
	return reasons, groups
}

func TestTriageGroups(t *testing.T) {
	t.Parallel()
	reasons, want := mixedReasons()
	b, dial := memoryBroker(t, "orders", reasons...)
	// Two the broker dead-lettered itself: x-death, no x-acemq-error.
	conn := b.Connect()
	defer conn.Close()
	died := b.Clock().Now().Add(-time.Hour)
	for i := range 2 {
		_, err := conn.Publish(context.Background(), transport.Publishing{RoutingKey: "orders.dlq", Mandatory: true,
			Headers: map[string]any{acemq.HeaderID: fmt.Sprintf("b-%d", i), "x-death": []any{map[string]any{
				"queue": "orders", "reason": "rejected", "count": int64(1 + i), "time": died.Add(time.Duration(i) * time.Minute)}}},
			Body: []byte("{}")})
		if err != nil {
			t.Fatal(err)
		}
	}
	want["the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected)"] = 1
	want["the broker dead-lettered it from queue orders: a consumer rejected it without requeueing it (rejected, <n> times)"] = 1
	total := len(reasons) + 2

	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--json")
	var got triageOut
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil {
		t.Fatalf("triage: %d %v\n%s%s", code, err, out, errOut)
	}
	if got.Depth != total || got.Read != total || len(got.Groups) != len(want) {
		t.Errorf("read %d of %d in %d groups, want %d in %d", got.Read, got.Depth, len(got.Groups), total, len(want))
	}
	for _, g := range got.Groups {
		if want[g.Key] != g.Count || g.ID != triage.ID(g.Key) {
			t.Errorf("group %s %q: %d, want %d", g.ID, g.Key, g.Count, want[g.Key])
		}
	}
	first := got.Groups[0]
	if first.Count != 7 || first.Kind != "exhausted" || first.MinAttempt != 5 || first.MaxAttempt != 5 || first.SampleID != "m-1" ||
		first.SampleBody != `{"order":"m-1"}` || first.FirstCreated == nil {
		t.Errorf("largest group: %+v", first)
	}
	for _, g := range got.Groups {
		if g.Kind == "broker" && (g.FirstDeadLettered == nil || g.FirstCreated != nil) {
			t.Errorf("broker group: %+v", g)
		}
	}
	if n := len(dlqIDs(b, "orders")); n != total {
		t.Errorf("%d left in orders.dlq, want %d: triage consumed", n, total)
	}

	code, out, _ = cli(t, dial, "triage", "--url", "amqp://localhost", "--queue", "orders.dlq")
	for _, s := range []string{
		fmt.Sprintf("orders.dlq: %d ready, read %d in 7 groups (none consumed)\n", total, total),
		"\n" + first.ID + "  7 messages  exhausted  attempts 5\n  reason:  exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503\n  created: ",
		"  sample:  m-1  {\"order\":\"m-1\"}\n",
		"  dead-lettered by the broker: ",
	} {
		if code != 0 || !strings.Contains(out, s) {
			t.Errorf("triage: %d, no %q in\n%s", code, s, out)
		}
	}
}

func TestTriageReplayGroup(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	b, dial := memoryBroker(t, "orders", reasons...)
	group := triage.ID("exhausted <n> attempts: POST https://wh.internal/reserve/<n>: HTTP 503")
	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--replay", group)
	want := fmt.Sprintf("orders.dlq: group %s, 7 messages when read: 7 replayed to orders, 0 left\norders.dlq: 18 messages ready before, 11 after\n", group)
	if code != 0 || out != want {
		t.Fatalf("replay: %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	if n := len(dlqIDs(b, "orders")); n != 11 {
		t.Errorf("%d in orders.dlq, want 11", n)
	}
	if n := b.Depth("orders"); n != 7 {
		t.Errorf("%d in orders, want 7", n)
	}
	// Again: nothing matches now, exit status 1 and nothing moves.
	code, _, errOut = cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--replay", group)
	if code != 1 || !strings.Contains(errOut, `no message of the 11 read in orders.dlq is in group "`+group+`"`) {
		t.Errorf("a group that matches nothing: %d %s", code, errOut)
	}
	// By its reason as printed, with a limit.
	code, out, errOut = cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--limit", "3", "--json",
		"--replay", `the handler rejected it: no such customer "<q>"`)
	var res actionOut
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Matched != 4 || res.Moved != 3 || res.Left != 1 || res.Before != 11 || res.After != 8 {
		t.Errorf("replay by reason: %d %v %+v %s", code, err, res, errOut)
	}
}

func TestTriageDiscardToFile(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	b, dial := memoryBroker(t, "orders", reasons...)
	file := filepath.Join(t.TempDir(), "archive.jsonl")
	group := triage.ID(`the handler rejected it: no such customer "<q>"`)
	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--discard", group,
		"--why", "customers deleted in the GDPR purge", "--operator", "alice", "--to-file", file)
	want := fmt.Sprintf("orders.dlq: group %s, 4 messages when read: 4 archived in %s, 0 left\norders.dlq: 18 messages ready before, 14 after\n", group, file)
	if code != 0 || out != want {
		t.Fatalf("discard: %d\n%s\nwant\n%s%s", code, out, want, errOut)
	}
	if n := len(dlqIDs(b, "orders")); n != 14 {
		t.Errorf("%d in orders.dlq, want 14", n)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ids []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line archived
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		body, _ := base64.StdEncoding.DecodeString(line.Body)
		id, _ := line.Headers[acemq.HeaderID].(string)
		if line.Audit.By != "alice" || line.Audit.Why != "customers deleted in the GDPR purge" || line.Audit.From != "orders.dlq" ||
			line.Audit.Group != group || line.Audit.At.IsZero() || string(body) != `{"order":"`+id+`"}` ||
			!strings.HasPrefix(line.Headers[acemq.HeaderError].(string), "the handler rejected it: no such customer") {
			t.Errorf("archived line: %s", sc.Bytes())
		}
		ids = append(ids, id)
	}
	if len(ids) != 4 {
		t.Errorf("archived %v", ids)
	}
}

func TestTriageDiscardToQueue(t *testing.T) {
	t.Parallel()
	reasons, _ := mixedReasons()
	b, dial := memoryBroker(t, "orders", reasons...)
	group := triage.ID("could not be decoded: invalid character '<q>' looking for beginning of value")
	code, out, errOut := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost", "--discard", group,
		"--why", "bodies from the broken v2 producer", "--operator", "bob", "--to-queue", "orders.archive", "--json")
	var res actionOut
	if err := json.Unmarshal([]byte(out), &res); code != 0 || err != nil || res.Moved != 3 || res.Before != 18 || res.After != 15 || res.To != "orders.archive" {
		t.Fatalf("discard: %d %v %+v %s", code, err, res, errOut)
	}
	if !strings.Contains(errOut, "declared the archive queue orders.archive (durable)") {
		t.Errorf("stderr: %s", errOut)
	}
	conn := b.Connect()
	defer conn.Close()
	for range 3 {
		d, ok, err := conn.Get(context.Background(), "orders.archive")
		if err != nil || !ok {
			t.Fatalf("archive: %v %v", ok, err)
		}
		if d.Headers[HeaderArchivedBy] != "bob" || d.Headers[HeaderArchivedWhy] != "bodies from the broken v2 producer" ||
			d.Headers[HeaderArchivedFrom] != "orders.dlq" || d.Headers[HeaderArchivedGroup] != group || d.Headers[acemq.HeaderError] == nil {
			t.Errorf("archived headers: %v", d.Headers)
		}
	}
}

func TestTriageCommandLine(t *testing.T) {
	t.Parallel()
	_, dial := memoryBroker(t, "orders", "exhausted 5 attempts: boom")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "give the queue"},
		{[]string{"orders.dlq", "--replay", "g1", "--discard", "g1"}, "not both"},
		{[]string{"orders.dlq", "--discard", "g1", "--why", "x"}, "needs one archive"},
		{[]string{"orders.dlq", "--discard", "g1", "--to-file", "f", "--to-queue", "q", "--why", "x"}, "needs one archive"},
		{[]string{"orders.dlq", "--discard", "g1", "--to-file", "f"}, "needs --why"},
		{[]string{"orders.dlq", "--to-file", "f"}, "go with --discard"},
		{[]string{"orders.dlq", "--to", "orders"}, "go with --replay"},
		{[]string{"orders.dlq", "--discard", "g1", "--to-queue", "orders.dlq", "--why", "x"}, "is the queue being triaged"},
	} {
		code, _, errOut := cli(t, dial, append([]string{"triage", "--url", "amqp://localhost"}, c.args...)...)
		if code != exitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %d %s", c.args, code, errOut)
		}
	}
}

// TestTriageEscapes: a hostile reason, id and body reach the output as
// visible escapes, in the groups and in an action's error.
func TestTriageEscapes(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders")
	seedHostile(t, b.Connect(), "orders")
	for _, args := range [][]string{{}, {"--json"}, {"--replay", "\x1b[2Jnope"}} {
		_, out, errOut := cli(t, dial, append([]string{"triage", "orders.dlq", "--url", "amqp://localhost"}, args...)...)
		assertSafe(t, "triage stdout", out)
		assertSafe(t, "triage stderr", errOut)
	}
	_, out, _ := cli(t, dial, "triage", "orders.dlq", "--url", "amqp://localhost")
	if !strings.Contains(out, `sample:  m-1\nm-9  1  1s  forged row\x1b[2J  {"note":"\x1b[31mred\x1b[0m\u2028"}`) {
		t.Errorf("triage:\n%s", out)
	}
}

// TestProgress: a pipe gets a line per interval with the counts, rate and
// time left; nothing before the first interval.
func TestProgress(t *testing.T) {
	t.Parallel()
	var errOut bytes.Buffer
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a := &app{stderr: &errOut, now: func() time.Time { return now }}
	p := a.newProgress("orders.dlq -> orders: moved", 1000, 2*time.Second)
	now = now.Add(time.Second)
	p.set(100)
	now = now.Add(time.Second)
	p.set(200)
	now = now.Add(3 * time.Second)
	p.set(500)
	p.stop()
	want := "orders.dlq -> orders: moved 200 of 1000 (20%), 100/s, ETA 8s\norders.dlq -> orders: moved 500 of 1000 (50%), 100/s, ETA 5s\n"
	if errOut.String() != want {
		t.Errorf("progress:\n%s\nwant\n%s", errOut.String(), want)
	}
	var never *progress
	never.set(1) // a nil progress shows nothing
	never.stop()
}

// TestReplayFilterMatchedNothing: a filter that matches nothing is exit
// status 1, and nothing moved.
func TestReplayFilterMatchedNothing(t *testing.T) {
	t.Parallel()
	b, dial := memoryBroker(t, "orders", "exhausted 5 attempts: boom", "the handler rejected it: no")
	code, out, errOut := cli(t, dial, "replay", "--url", "amqp://x", "--queue", "orders", "--match", "warehouse")
	if code != 1 || out != "moved 0, skipped 2 (drained)\n" || !strings.Contains(errOut, "the filter matched none of the 2 messages read") || b.Depth("orders.dlq") != 2 {
		t.Errorf("%d\n%s%s", code, out, errOut)
	}
}
