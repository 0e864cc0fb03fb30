package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The systems compared.
const (
	acemqSys     = "acemq"
	rawSys       = "amqp091"
	watermillSys = "watermill"
)

var allSystems = []string{acemqSys, rawSys, watermillSys}

func isSystem(s string) bool { return slices.Contains(allSystems, s) }

// runFunc runs one system through one scenario once. It calls m.start just
// before the timed part and m.stop just after, so that set-up (dialling,
// filling a queue) is neither timed nor counted in allocations.
type runFunc func(ctx context.Context, e *env, m *meter) error

// scenario is one workload, run by each system that has it.
type scenario struct {
	name     string
	broker   bool // needs RabbitMQ
	postgres bool // needs PostgreSQL (-postgres)
	n        func(config) int
	run      map[string]runFunc
}

var scenarios = []*scenario{
	{name: "publish", broker: true, n: func(c config) int { return c.n }, run: map[string]runFunc{
		acemqSys: publishAcemq, rawSys: publishRaw, watermillSys: publishWatermill,
	}},
	{name: "consume", broker: true, n: func(c config) int { return c.n }, run: map[string]runFunc{
		acemqSys: consumeAcemq, rawSys: consumeRaw, watermillSys: consumeWatermill,
	}},
	{name: "memory", n: func(c config) int { return c.memoryN }, run: map[string]runFunc{
		acemqSys: memoryAcemq, watermillSys: memoryWatermill,
	}},
	{name: "retry", broker: true, n: func(c config) int { return c.retryN }, run: map[string]runFunc{
		acemqSys: retryAcemq, watermillSys: retryWatermill,
	}},
	{name: "latency", broker: true, n: func(config) int { return 1 }, run: map[string]runFunc{
		acemqSys: latencyAcemq, rawSys: latencyRaw, watermillSys: latencyWatermill,
	}},
	{name: "partitions", broker: true, n: func(c config) int { return c.partitionN * len(partitionLayouts(c)) }, run: map[string]runFunc{
		acemqSys: partitionsAcemq, // one queue against 1, 2 and 4 partitions, all acemq (partitions.go)
	}},
	{name: "relay", broker: true, postgres: true, n: func(c config) int { return c.relayN }, run: map[string]runFunc{
		acemqSys: relayAcemq, rawSys: publishRaw, // raw: the publish scenario's own confirmed publishing
	}},
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

func scenarioByName(name string) *scenario {
	for _, s := range scenarios {
		if s.name == name {
			return s
		}
	}
	return nil
}

// env is what a run gets: the settings, its message count and body, and a
// fresh queue name.
type env struct {
	cfg   config
	n     int
	body  []byte
	queue string
	admin *admin   // nil without a broker
	extra []string // queues the run declared beside queue, deleted after it
	round int      // from 0
}

// result is one run's measurements.
type result struct {
	scenario, system string
	round            int
	n                int
	elapsed          time.Duration
	allocsPerMsg     float64
	bytesPerMsg      float64
	peakHeap         uint64        // the most heap found live, above that at start
	cpuPerMsg        time.Duration // the process's CPU time (user and system)
	brokerCPUPerMsg  time.Duration // the broker's, when it runs here; 0 when unknown
	// retry only: deliveries held unsettled while waiting for their retry
	peakHeld     int
	heldPerRetry time.Duration
	// latency only: each load's percentiles (latency.go)
	latency []loadLatency
	// partitions only: each layout's run (partitions.go)
	partitions []partitionRun
	// relay only: PostgreSQL's share and the parts alone (relay.go)
	relay *relayFigures
}

func (r result) msgsPerSec() float64 { return float64(r.n) / r.elapsed.Seconds() }

// runAll runs the rounds. Scenarios needing a broker are skipped without
// one.
func runAll(ctx context.Context, cfg config, progress io.Writer) ([]result, error) {
	var adm *admin
	if cfg.url != "" {
		a, err := dialAdmin(cfg.url)
		if err != nil {
			return nil, err
		}
		defer a.close()
		adm = a
		if cfg.brokerPID == 0 {
			cfg.brokerPID = brokerPID(cfg.url)
		}
	}
	for _, name := range cfg.scenarios {
		if sc := scenarioByName(name); sc.postgres && cfg.postgresURL == "" {
			fmt.Fprintf(progress, "%s: skipped: no PostgreSQL URL (-postgres or $ACEMQ_POSTGRES_URL)\n", name)
		}
	}
	body := jsonBody(cfg.bodySize)
	runID := newID()[:8]
	var results []result
	for round := range cfg.rounds {
		for _, name := range cfg.scenarios {
			sc := scenarioByName(name)
			if sc.broker && adm == nil || sc.postgres && cfg.postgresURL == "" {
				continue
			}
			systems := rotate(cfg.systems, round)
			for _, sys := range systems {
				fn := sc.run[sys]
				if fn == nil {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				e := &env{
					cfg:   cfg,
					n:     sc.n(cfg),
					body:  body,
					queue: fmt.Sprintf("bench.%s.%s.%s.r%d", runID, sc.name, sys, round+1),
					admin: adm,
					round: round,
				}
				r, err := runOne(ctx, sc, sys, e)
				if err != nil {
					return nil, fmt.Errorf("round %d, %s, %s: %w", round+1, sc.name, sys, err)
				}
				r.round = round + 1
				results = append(results, r)
				fmt.Fprintf(progress, "round %d  %-8s %-10s %10.0f msgs/s  CPU µs/msg %5.1f (broker %5.1f)  %6.1f allocs/msg  peak live heap +%.1f MiB%s\n",
					round+1, sc.name, sys, r.msgsPerSec(), micros(r.cpuPerMsg), micros(r.brokerCPUPerMsg), r.allocsPerMsg, float64(r.peakHeap)/(1<<20), retryNote(r)+latencyNote(r)+partitionsNote(r)+relayNote(r))
			}
		}
	}
	return results, nil
}

func retryNote(r result) string {
	if r.scenario != "retry" {
		return ""
	}
	return fmt.Sprintf("  slots held waiting: peak %d, %.1f ms per retry", r.peakHeld, float64(r.heldPerRetry)/float64(time.Millisecond))
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// rotate starts the list at round, so no system always runs first.
func rotate(s []string, round int) []string {
	if len(s) == 0 {
		return nil
	}
	k := round % len(s)
	return append(slices.Clone(s[k:]), s[:k]...)
}

// runOne runs fn under pprof labels, so a CPU profile of the whole run can
// be cut by system and scenario. Goroutines the run starts (amqp091-go's
// readers included) inherit the labels.
func runOne(ctx context.Context, sc *scenario, sys string, e *env) (result, error) {
	m := &meter{}
	if sc.broker {
		m.brokerPID = e.cfg.brokerPID
	}
	var err error
	runtime.GC()
	pprof.Do(ctx, pprof.Labels("system", sys, "scenario", sc.name), func(ctx context.Context) {
		err = sc.run[sys](ctx, e, m)
	})
	m.halt()
	if e.admin != nil && sc.broker {
		if derr := e.admin.deleteQueues(e.queue, e.extra...); err == nil {
			err = derr
		}
	}
	if err != nil {
		return result{}, err
	}
	if !m.stopped {
		return result{}, fmt.Errorf("the run never stopped its meter")
	}
	r := result{
		scenario:        sc.name,
		system:          sys,
		n:               e.n,
		elapsed:         m.elapsed,
		allocsPerMsg:    float64(m.mallocs) / float64(e.n),
		bytesPerMsg:     float64(m.bytes) / float64(e.n),
		peakHeap:        m.peakHeap,
		cpuPerMsg:       m.cpu / time.Duration(e.n),
		brokerCPUPerMsg: m.brokerCPU / time.Duration(e.n),
		peakHeld:        m.peakHeld,
		latency:         m.latency,
		partitions:      m.partitions,
		relay:           m.relay,
	}
	if m.retries > 0 {
		r.heldPerRetry = m.heldTotal / time.Duration(m.retries)
	}
	return r, nil
}

// meter times the measured part of a run, counts its allocations and
// samples the heap. Allocation counts are process-wide: they include the
// client library's goroutines, which is the point.
type meter struct {
	began time.Time
	cpu0  time.Duration
	cpu   time.Duration

	brokerPID  int // 0: not measured
	brokerCPU0 time.Duration
	brokerCPU  time.Duration
	mallocs0   uint64
	bytes0     uint64
	heap0      uint64
	stopped    bool
	elapsed    time.Duration
	mallocs    uint64
	bytes      uint64
	peakHeap   uint64

	sampling chan struct{}
	sampled  sync.WaitGroup
	peak     atomic.Uint64

	// slots held while waiting for a retry (retry scenario)
	heldMu    sync.Mutex
	held      int
	peakHeld  int
	heldTotal time.Duration
	retries   int

	latency    []loadLatency  // latency scenario
	partitions []partitionRun // partitions scenario
	relay      *relayFigures  // relay scenario
}

func (m *meter) start() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs0, m.bytes0 = ms.Mallocs, ms.TotalAlloc
	m.heap0 = heapObjects()
	m.peak.Store(m.heap0)
	m.sampling = make(chan struct{})
	m.sampled.Add(1)
	go m.sample()
	m.cpu0 = processCPU()
	if t, ok := processCPUOf(m.brokerPID); ok {
		m.brokerCPU0 = t
	} else {
		m.brokerPID = 0
	}
	m.began = time.Now()
}

func (m *meter) stop() {
	if m.stopped {
		return
	}
	m.elapsed = time.Since(m.began)
	m.cpu = processCPU() - m.cpu0
	if t, ok := processCPUOf(m.brokerPID); ok {
		m.brokerCPU = t - m.brokerCPU0
	}
	m.stopped = true
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.mallocs, m.bytes = ms.Mallocs-m.mallocs0, ms.TotalAlloc-m.bytes0
	m.halt()
	if p := m.peak.Load(); p > m.heap0 {
		m.peakHeap = p - m.heap0
	}
}

// halt stops the sampler; it is safe to call more than once.
func (m *meter) halt() {
	if m.sampling != nil {
		close(m.sampling)
		m.sampled.Wait()
		m.sampling = nil
	}
}

func (m *meter) sample() {
	defer m.sampled.Done()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-m.sampling:
			return
		case <-t.C:
			if h := heapObjects(); h > m.peak.Load() {
				m.peak.Store(h)
			}
		}
	}
}

// hold records that a delivery began waiting for its retry while holding
// a consumer slot; the returned func records the end of the wait.
func (m *meter) hold() (release func()) {
	began := time.Now()
	m.heldMu.Lock()
	m.held++
	m.retries++
	m.peakHeld = max(m.peakHeld, m.held)
	m.heldMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.heldMu.Lock()
			m.held--
			m.heldTotal += time.Since(began)
			m.heldMu.Unlock()
		})
	}
}

// processCPU is the CPU time the process has used, user and system: a
// client's cost per message that the broker's speed does not move.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapObjects is the heap the last GC found live: what the run holds on
// to, whatever the GC's pacing. It is cheap to read, unlike
// runtime.ReadMemStats.
func heapObjects() uint64 {
	s := [1]metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// jsonBody is a JSON object of exactly size bytes: the decode middleware
// validates it like any order a service would receive.
func jsonBody(size int) []byte {
	const head = `{"id":12345,"customer":"c-778","pad":"`
	const tail = `"}`
	pad := size - len(head) - len(tail)
	if pad < 0 {
		pad = 0
	}
	b := make([]byte, 0, size)
	b = append(b, head...)
	for i := range pad {
		b = append(b, 'a'+byte(i%26))
	}
	return append(b, tail...)
}

// newID is a random id in UUID form, what a careful user of raw amqp091-go
// would stamp on each message.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// counter counts handled messages and says when the last one is in.
type counter struct {
	n    int64
	c    atomic.Int64
	done chan struct{}
}

func newCounter(n int) *counter { return &counter{n: int64(n), done: make(chan struct{})} }

func (c *counter) inc() {
	if c.c.Add(1) == c.n {
		close(c.done)
	}
}

// wait returns once n messages were counted, or fails when ctx ends or the
// count did not move for stall.
func (c *counter) wait(ctx context.Context, stall time.Duration) error {
	t := time.NewTicker(stall / 4)
	defer t.Stop()
	last, lastMove := c.c.Load(), time.Now()
	for {
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if now := c.c.Load(); now != last {
				last, lastMove = now, time.Now()
			} else if time.Since(lastMove) > stall {
				return fmt.Errorf("stalled at %d of %d messages", now, c.n)
			}
		}
	}
}
