package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"testing"
	"time"

	"github.com/acemq/acemq/delay"
)

// brokerURL is $ACEMQ_AMQP_URL, a vhost of the test's own (./scripts/test
// makes one for this module). The broker tests skip only when it is unset
// and CI is unset too: under CI a missing broker is a failure.
func brokerURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("ACEMQ_AMQP_URL")
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("CI is set but ACEMQ_AMQP_URL is not: the broker tests may not skip (run ./scripts/test)")
		}
		t.Skip("no $ACEMQ_AMQP_URL")
	}
	return url
}

func TestDistOf(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // 1..100 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := distOf(ds)
	want := dist{N: 100, Min: 1, P50: 50, P90: 90, P99: 99, Max: 100, Mean: 50.5}
	if got != want {
		t.Errorf("distOf(1..100ms) = %+v, want %+v", got, want)
	}
	if got := distOf([]time.Duration{7 * time.Millisecond}); got.P50 != 7 || got.P99 != 7 || got.Max != 7 {
		t.Errorf("one value: %+v", got)
	}
	if got := distOf(nil); got != (dist{}) {
		t.Errorf("none: %+v", got)
	}
}

// TestSummarizeLateness: early, missing and duplicates are counted, and
// the due time is the later of the header and publish + rounded delay.
func TestSummarizeLateness(t *testing.T) {
	t0 := time.UnixMilli(1_700_000_000_000).Add(300 * time.Microsecond)
	wait := 8 * delay.Unit // 1 s, one hop
	due := t0.Add(wait)
	recs := []latRecord{
		// on time by the header's truncated milliseconds, 0.1 ms early by the publish
		{asked: 900 * time.Millisecond, wait: wait, published: t0, dueHeader: due.UnixMilli(), arrived: due.Add(-100 * time.Microsecond), deliveries: 1},
		{asked: wait, wait: wait, published: t0, dueHeader: due.UnixMilli(), arrived: due.Add(20 * time.Millisecond), deliveries: 2},
		{asked: wait, wait: wait, published: t0, arrived: due.Add(40 * time.Millisecond), deliveries: 1}, // no header
		{asked: wait, wait: wait, published: t0}, // missing
	}
	s := summarizeLateness(latenessConfig{min: time.Second, max: 2 * time.Second}, latRun{recs: recs, foreign: 3})
	if s.Early != 1 || s.Missing != 1 || s.Duplicates != 1 || s.NoHeader != 1 || s.Arrived != 3 || s.Foreign != 3 {
		t.Errorf("%+v", s)
	}
	if s.Lateness.Max != 40 || s.Lateness.Min != -0.1 {
		t.Errorf("lateness %+v", s.Lateness)
	}
	if s.AfterAsked.Max != 99.9 { // asked 900 ms, rounded to 1 s, arrived 0.1 ms before
		t.Errorf("after asked %+v", s.AfterAsked)
	}
	if d := s.ByHops[1]; d.N != 3 {
		t.Errorf("by hops %+v", s.ByHops)
	}
}

func TestDelayFlags(t *testing.T) {
	url := []string{"-amqp", "amqp://localhost/x"}
	for _, args := range [][]string{
		{"-amqp", ""},
		append(url, "-min", "0s"),
		append(url, "-min", "3s", "-max", "2s"),
		append(url, "-max", "10000h"),
		append(url, "-n", "0"),
		append(url, "stray"),
	} {
		if _, err := parseLatenessFlags(args, io.Discard); err == nil {
			t.Errorf("lateness %v: no error", args)
		}
	}
	for _, args := range [][]string{
		{"-amqp", ""},
		append(url, "-modes", "plain"),
		append(url, "-modes", "plain,scheduled,nope"),
		append(url, "-delay", "1m"),
		append(url, "-rounds", "0"),
	} {
		if _, err := parseScheduledFlags(args, io.Discard); err == nil {
			t.Errorf("scheduled %v: no error", args)
		}
	}
	c, err := parseLatenessFlags(url, io.Discard)
	if err != nil || c.n != 2000 || c.min != time.Second || c.max != 2*time.Minute || c.seed == 0 {
		t.Errorf("lateness defaults: %+v, %v", c, err)
	}
}

// TestLatenessSmoke runs the lateness command with 50 messages of 1–3 s
// on the broker of $ACEMQ_AMQP_URL: about 4 s.
func TestLatenessSmoke(t *testing.T) {
	url := brokerURL(t)
	var out bytes.Buffer
	err := run([]string{"lateness", "-amqp", url, "-n", "50", "-min", "1s", "-max", "3s", "-grace", "5s", "-json", "-q"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var s latSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	t.Logf("lateness of 50 messages of 1–3 s: %+v", s.Lateness)
	if s.N != 50 || s.Arrived != 50 || s.Early != 0 || s.Missing != 0 || s.NoHeader != 0 || s.Lateness.N != 50 {
		t.Errorf("%+v", s)
	}
}

// TestScheduledSmoke runs one round of the scheduled command with 50
// publishes per mode. It needs a vhost whose delay queues are idle (the
// command refuses to purge others' messages): one of its own.
func TestScheduledSmoke(t *testing.T) {
	url := brokerURL(t)
	var out bytes.Buffer
	err := run([]string{"scheduled", "-amqp", url, "-n", "50", "-rounds", "1", "-json", "-q"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]schedRow{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r schedRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		rows[r.Mode] = r
	}
	for _, mode := range allModes {
		if r, ok := rows[mode]; !ok || r.MsgsPerS.Median <= 0 || r.Rounds != 1 {
			t.Errorf("%s: %+v", mode, r)
		}
	}
	if s, ok := rows[scheduledMode].Ratios["vs_plain"]; !ok || s.Median <= 0 {
		t.Errorf("no scheduled/plain ratio: %+v", rows[scheduledMode])
	}
}
