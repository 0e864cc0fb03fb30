package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// The latency scenario: publish-to-handler latency at a fixed offered
// rate. For each system, one pipeline (its publisher and its consumer on
// one queue, in this process) is first calibrated closed-loop: cfg.publishers
// goroutines publish as fast as the window lets them for
// cfg.latencyCalibrate while the consumer handles, and the pipeline's
// maximum is the messages handled over the time to the last one. Then it
// is offered cfg.latencyLoads of that maximum, cfg.latencySeconds each, on
// an open-loop schedule: message i is due at t0 + i/rate, the pacer hands
// it to a publisher at that time whatever the consumer or the confirms are
// doing, and its latency is the handler's receive time minus its due time
// (one process, one monotonic clock). A publisher held up by a full window
// delays its message, and the delay counts: coordinated omission cannot
// hide it. The body carries the phase and the index of the message; the
// due time is computed from them.

// loadLatency is one load's figures in one run.
type loadLatency struct {
	load    float64       // of the maximum
	maxRate float64       // the calibrated (or given) maximum, msgs/s
	rate    float64       // offered, msgs/s
	n       int           // messages offered and handled
	p50     time.Duration // nearest-rank percentiles of handler receive − due
	p99     time.Duration
	p999    time.Duration
	max     time.Duration
	dups    int // deliveries of a message already handled
}

// latencyPipe is one system's publisher and consumer on e.queue. The
// consumer calls sink with each body, in its handler.
type latencyPipe struct {
	publish func(ctx context.Context, body []byte) error
	close   func(ctx context.Context) error
}

type openPipe func(ctx context.Context, e *env, sink func(body []byte)) (*latencyPipe, error)

func latencyAcemq(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openAcemqPipe)
}

func latencyRaw(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openRawPipe)
}

func latencyWatermill(ctx context.Context, e *env, m *meter) error {
	return runLatency(ctx, e, m, openWatermillPipe)
}

// runLatency calibrates e's pipeline, then offers it each load.
func runLatency(ctx context.Context, e *env, m *meter, open openPipe) error {
	if err := e.admin.declare(e.queue); err != nil {
		return err
	}
	var cur atomic.Pointer[phaseRec]
	sink := func(body []byte) {
		at := time.Now()
		ph, i, ok := parseLatencyBody(body)
		p := cur.Load()
		if !ok {
			p.bad.Add(1)
			return
		}
		p.arrive(ph, i, at)
	}
	warm := newPhase(0, e.cfg.channels, 0)
	warm.t0 = time.Now()
	cur.Store(warm)
	pipe, err := open(ctx, e, sink)
	if err != nil {
		return err
	}
	defer func() {
		if pipe != nil {
			_ = pipe.close(context.Background())
		}
	}()
	// Warm-up, untimed: one message per confirm channel, so lazily opened
	// channels are open and acemq's consumer is past its probation.
	for i := range e.cfg.channels {
		if err := pipe.publish(ctx, latencyBody(e.cfg.bodySize, 0, i)); err != nil {
			return err
		}
	}
	if err := warm.wait(ctx, e.cfg.channels); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}

	m.start()
	total := 0
	maxRate := e.cfg.latencyRate
	if maxRate <= 0 {
		r, n, err := calibrate(ctx, e, pipe, &cur)
		if err != nil {
			return err
		}
		maxRate, total = r, n
	}
	for k, load := range e.cfg.latencyLoads {
		rate := load * maxRate
		n := max(1, int(rate*e.cfg.latencySeconds.Seconds()))
		p := newPhase(2+k, n, rate)
		out := make(chan int, n)
		pcx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var once sync.Once
		var perr error
		for range e.cfg.publishers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range out {
					if err := pipe.publish(pcx, latencyBody(e.cfg.bodySize, p.id, i)); err != nil {
						once.Do(func() { perr = err; cancel() })
						return
					}
				}
			}()
		}
		p.t0 = time.Now()
		cur.Store(p)
		pace(pcx, p.t0, rate, n, out)
		close(out)
		wg.Wait()
		cancel()
		if perr != nil {
			return fmt.Errorf("load %.0f%%: %w", load*100, perr)
		}
		if err := p.wait(ctx, n); err != nil {
			return fmt.Errorf("load %.0f%%: %w", load*100, err)
		}
		if b := p.bad.Load(); b > 0 {
			return fmt.Errorf("load %.0f%%: %d deliveries of another phase or unreadable", load*100, b)
		}
		q := percentiles(p.latencies(), 0.50, 0.99, 0.999, 1)
		m.latency = append(m.latency, loadLatency{load: load, maxRate: maxRate, rate: rate, n: n,
			p50: q[0], p99: q[1], p999: q[2], max: q[3], dups: int(p.dups.Load())})
		total += n
	}
	m.stop()
	e.n = max(total, 1)
	err = pipe.close(ctx)
	pipe = nil
	if err != nil {
		return err
	}
	return expectEmpty(e)
}

// calibrate publishes closed-loop for cfg.latencyCalibrate and returns the
// pipeline's rate: messages handled over the time from the first publish to
// the last one handled.
func calibrate(ctx context.Context, e *env, pipe *latencyPipe, cur *atomic.Pointer[phaseRec]) (float64, int, error) {
	// At most the rate the window allows for the time given; ample room.
	const ceiling = 200_000
	p := newPhase(1, int(ceiling*e.cfg.latencyCalibrate.Seconds())+1, 0)
	var next atomic.Int64
	p.t0 = time.Now()
	cur.Store(p)
	deadline := p.t0.Add(e.cfg.latencyCalibrate)
	// Not publishAll: its first error cancels the publishes under way,
	// and a message cancelled before it was sent would be waited for in
	// vain. Each goroutine stops taking indexes at the deadline; the
	// publishes under way finish.
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		stop  atomic.Bool
	)
	for range e.cfg.publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() && time.Now().Before(deadline) {
				i := int(next.Add(1)) - 1
				if i >= len(p.lat) {
					return
				}
				if err := pipe.publish(ctx, latencyBody(e.cfg.bodySize, 1, i)); err != nil {
					once.Do(func() { first = err; stop.Store(true) })
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return 0, 0, fmt.Errorf("calibration: %w", first)
	}
	n := int(min(next.Load(), int64(len(p.lat))))
	if err := p.wait(ctx, n); err != nil {
		return 0, 0, fmt.Errorf("calibration: %w", err)
	}
	elapsed := time.Duration(p.last.Load())
	if n == 0 || elapsed <= 0 {
		return 0, 0, errors.New("calibration: nothing handled")
	}
	return float64(n) / elapsed.Seconds(), n, nil
}

// parseLoads reads -latency-loads: fractions in (0, 1.5].
func parseLoads(s string) ([]float64, error) {
	var out []float64
	for _, f := range splitList(s) {
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 || v > 1.5 {
			return nil, fmt.Errorf("-latency-loads: %q is not a fraction of the maximum in (0, 1.5]", f)
		}
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("-latency-loads: none given")
	}
	return out, nil
}
