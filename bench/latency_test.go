package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"
)

// TestPercentiles: nearest rank, the smallest value with at least p of
// the values at or below it.
func TestPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- { // 1..1000 µs, unsorted
		ds = append(ds, time.Duration(i)*time.Microsecond)
	}
	got := percentiles(ds, 0.5, 0.99, 0.999, 1)
	want := []time.Duration{500 * time.Microsecond, 990 * time.Microsecond, 999 * time.Microsecond, 1000 * time.Microsecond}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("percentiles(1..1000µs)[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	// With fewer than 1000 values p99.9 is the largest.
	if got := percentiles(ds[:10], 0.999); got[0] != 1000*time.Microsecond {
		t.Errorf("p99.9 of 10 values: %v", got[0])
	}
	if got := percentiles(nil, 0.5); got[0] != 0 {
		t.Errorf("none: %v", got)
	}
}

// TestPaceOpenLoop: the pacer hands over every index in order, none
// before its due time, and never waits for a reader: nobody reads out
// until it has returned.
func TestPaceOpenLoop(t *testing.T) {
	const n, rate = 200, 4000.0 // 50 ms
	out := make(chan int, n)
	t0 := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pace(context.Background(), t0, rate, n, out)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("pace did not return with nobody reading")
	}
	close(out)
	i := 0
	for got := range out {
		if got != i {
			t.Fatalf("index %d handed over as %d", i, got)
		}
		i++
	}
	if i != n {
		t.Fatalf("%d indexes, want %d", i, n)
	}
	// Never early: the last is due at (n-1)/rate, and pace cannot have
	// returned before.
	if el := time.Since(t0); el < dueOffset(n-1, rate) {
		t.Errorf("returned after %v, before the last due time %v", el, dueOffset(n-1, rate))
	}
	if dueOffset(4000, rate) != time.Second || dueOffset(1, rate) != 250*time.Microsecond {
		t.Errorf("dueOffset: %v, %v", dueOffset(4000, rate), dueOffset(1, rate))
	}
}

// TestPaceStopsWithContext: a cancelled run does not sit out its
// schedule.
func TestPaceStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out := make(chan int, 10)
	pace(ctx, time.Now(), 0.001, 10, out) // 1000 s apart
	if len(out) > 1 {
		t.Errorf("%d handed over after the context ended", len(out))
	}
}

func TestLatencyBody(t *testing.T) {
	for _, size := range []int{64, 256, 1024} {
		b := latencyBody(size, 3, 1234567)
		if len(b) != size || !json.Valid(b) {
			t.Errorf("latencyBody(%d): %d bytes, valid %v: %s", size, len(b), json.Valid(b), b)
		}
		ph, i, ok := parseLatencyBody(b)
		if !ok || ph != 3 || i != 1234567 {
			t.Errorf("parseLatencyBody(%s) = %d, %d, %v", b, ph, i, ok)
		}
	}
	for _, b := range []string{"", `{"id":1}`, `{"seq":"x-0000000001"}`, `{"seq":"1-00000000a1"}`} {
		if _, _, ok := parseLatencyBody([]byte(b)); ok {
			t.Errorf("parseLatencyBody(%q) accepted", b)
		}
	}
}

// TestPhaseRec: latency is receive − due, a second delivery is a
// duplicate, another phase's body is counted as bad.
func TestPhaseRec(t *testing.T) {
	p := newPhase(2, 3, 1000) // due at 0, 1, 2 ms
	p.t0 = time.Now()
	p.arrive(2, 1, p.t0.Add(5*time.Millisecond))
	p.arrive(2, 1, p.t0.Add(6*time.Millisecond))
	p.arrive(2, 0, p.t0.Add(2*time.Millisecond))
	p.arrive(1, 2, p.t0)
	p.arrive(2, 7, p.t0)
	if p.got.Load() != 2 || p.dups.Load() != 1 || p.bad.Load() != 2 {
		t.Errorf("got %d dups %d bad %d", p.got.Load(), p.dups.Load(), p.bad.Load())
	}
	got := percentiles(p.latencies(), 0, 1)
	if got[0] != 2*time.Millisecond || got[1] != 4*time.Millisecond {
		t.Errorf("latencies %v", p.latencies())
	}
	if p.last.Load() != int64(5*time.Millisecond) {
		t.Errorf("last %v", time.Duration(p.last.Load()))
	}
}

// TestLatencyRows: the medians over rounds, and acemq's p99 minus raw's
// in the same round, against the 1 ms target at half load.
func TestLatencyRows(t *testing.T) {
	res := func(sys string, round int, p99 time.Duration) result {
		return result{scenario: "latency", system: sys, round: round, latency: []loadLatency{
			{load: 0.5, maxRate: 1000, rate: 500, n: 100, p50: p99 / 2, p99: p99, p999: p99, max: p99},
		}}
	}
	ms := time.Millisecond
	rows := latencyRows([]result{
		res(acemqSys, 1, 3*ms), res(rawSys, 1, 1*ms), // +2
		res(acemqSys, 2, 2*ms), res(rawSys, 2, 2*ms), // 0
		res(acemqSys, 3, 4*ms), res(rawSys, 3, 3500*time.Microsecond), // +0.5
	})
	if len(rows) != 2 {
		t.Fatalf("%d rows: %+v", len(rows), rows)
	}
	a := rows[0].Latency
	if rows[0].System != acemqSys || a.P99 != (spread{Median: 3, Min: 2, Max: 4}) {
		t.Errorf("acemq p99 %+v", a.P99)
	}
	if a.P99VsRaw == nil || *a.P99VsRaw != (spread{Median: 0.5, Min: 0, Max: 2}) {
		t.Errorf("acemq − raw p99 %+v", a.P99VsRaw)
	}
	if a.TargetMet == nil || !*a.TargetMet {
		t.Errorf("target: %v", a.TargetMet)
	}
	if rows[1].Latency.P99VsRaw != nil {
		t.Errorf("raw has a difference to itself: %+v", rows[1].Latency)
	}
	var out bytes.Buffer
	writeLatencyTable(&out, rows)
	if !bytes.Contains(out.Bytes(), []byte("target p99 ≤ amqp091 + 1 ms: ok")) {
		t.Errorf("table:\n%s", out.String())
	}
}

func TestLatencyFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-latency-loads", "0"},
		{"-latency-loads", "half"},
		{"-latency-loads", ","},
		{"-latency-seconds", "0s"},
		{"-latency-rate", "-1"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
	c, err := parseFlags([]string{"-latency-loads", "0.1, 0.8"}, io.Discard)
	if err != nil || len(c.latencyLoads) != 2 || c.latencyLoads[1] != 0.8 {
		t.Errorf("%v %v", c.latencyLoads, err)
	}
}

// TestLatencySmoke runs the scenario against the broker, small, with its
// calibration: every system's rows, every load, with percentiles in order.
func TestLatencySmoke(t *testing.T) {
	url := brokerURL(t)
	var out bytes.Buffer
	args := []string{"-amqp", url, "-scenarios", "latency", "-rounds", "1", "-latency-seconds", "300ms",
		"-latency-calibrate", "300ms", "-json", "-q", "-broker-pid", "-1"}
	if err := run(args, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if r.Scenario != "latency" {
			continue
		}
		n++
		l := r.Latency
		if l == nil || l.P50.Median <= 0 || l.P50.Median > l.P99.Median || l.P99.Median > l.P999.Median || l.P999.Median > l.Max.Median ||
			l.MaxMsgsPerS.Median <= 0 || l.Offered.Median != l.Load*l.MaxMsgsPerS.Median || r.N != max(1, int(l.Offered.Median*0.3)) {
			t.Errorf("%s: %+v", sc.Text(), l)
		}
		if r.System == acemqSys && (l.P99VsRaw == nil || (l.Load == 0.5) != (l.TargetMet != nil)) {
			t.Errorf("acemq row without its difference to raw: %s", sc.Text())
		}
	}
	if n != 9 {
		t.Errorf("%d latency rows, want 9:\n%s", n, out.String())
	}
}
