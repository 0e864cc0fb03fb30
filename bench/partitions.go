package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/ack"
	rabbitmq "github.com/acemq/acemq/transport/amqp"
)

// The partitions scenario: one logical queue laid out as one plain queue
// (the baseline) or as 1, 2 and 4 partitions (acemq.QueueConfig.Partitions),
// measured end to end in every round. Publishers send n messages, their
// keys spread over partitionKeys keys, to Partitioned.For(key) while
// Servers consume every partition under the one Mux entry and accept
// them; the clock runs from the first publish to the last message handled
// and the last publish confirmed, whichever comes later.
//
// End to end, not publish and consume apart: what the partitions lift is
// the one Erlang process that both enqueues and delivers a queue's
// messages, and a service runs both at once. A pre-filled queue drained
// alone, or publishes into a queue nobody consumes, would each load the
// queue process with half its work.
//
// The publisher side must not be what bounds the figure, so there are
// -partition-publishers publishers, each the publish scenario's own (a
// transport with -channels confirm channels and -window publishes awaiting
// a confirm, -publishers goroutines). With several URLs (a cluster's
// nodes, -partition-urls) the publishers and the Servers connect spread
// over them, one Server per node, as a service's instances would.

// partitionKeys is how many distinct keys the messages carry: many more
// than partitions, so FNV-1a spreads them evenly.
const partitionKeys = 4096

// partitionRun is one layout's end-to-end run within a round.
type partitionRun struct {
	queueType      string // quorum or classic
	count          int    // partitions; 0 is one plain queue
	n              int
	elapsed        time.Duration // first publish to the last message handled and the last confirm
	publishElapsed time.Duration // first publish to the last confirm
	cpu            time.Duration // the bench process's, user and system
	brokerCPU      time.Duration // every node's; 0 when unknown
	mallocs, bytes uint64        // the process's allocations
	perQueue       []int         // messages handled per physical queue
	leaders        []string      // each physical queue's leader node, when asked (-partition-placement)
}

func (r partitionRun) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// variant names the layout: "queue" for the plain queue, "p4" for four
// partitions.
func (r partitionRun) variant() string { return variantName(r.count) }

func variantName(count int) string {
	if count == 0 {
		return "queue"
	}
	return "p" + strconv.Itoa(count)
}

// partitionLayout is one layout to run.
type partitionLayout struct {
	queueType string
	count     int
}

func partitionLayouts(cfg config) []partitionLayout {
	var out []partitionLayout
	for _, t := range cfg.partitionTypes {
		out = append(out, partitionLayout{t, 0})
		for _, c := range cfg.partitionCounts {
			out = append(out, partitionLayout{t, c})
		}
	}
	return out
}

// partitionURLs are the nodes the scenario connects to.
func partitionURLs(cfg config) []string {
	if len(cfg.partitionURLs) > 0 {
		return cfg.partitionURLs
	}
	return []string{cfg.url}
}

// partitionArgs are the queue's declaration arguments: its type. On a
// cluster no leader locator: the servers, given every node's URL, declare
// partition i through node i mod N (transport.Queue.Home), and the
// default locator, client-local, makes it the leader.
func partitionArgs(queueType string, _ bool) map[string]any {
	return map[string]any{"x-queue-type": queueType}
}

// partitionsAcemq runs every layout once, the order rotating from round
// to round, and keeps each run's figures in the meter.
func partitionsAcemq(ctx context.Context, e *env, m *meter) error {
	urls := partitionURLs(e.cfg)
	pids := brokerPIDs(e.cfg, urls)
	layouts := partitionLayouts(e.cfg)
	k := e.round % len(layouts)
	layouts = append(layouts[k:], layouts[:k]...)
	m.start()
	defer m.stop()
	for _, l := range layouts {
		r, err := runPartitionLayout(ctx, e, urls, pids, l)
		if err != nil {
			return fmt.Errorf("%s %s: %w", l.queueType, variantName(l.count), err)
		}
		m.partitions = append(m.partitions, r)
	}
	return nil
}

// brokerPIDs are the broker processes of the URLs on this machine, each
// once; -broker-pid names the only one, -1 none.
func brokerPIDs(cfg config, urls []string) []int {
	switch {
	case cfg.brokerPID < 0:
		return nil
	case cfg.brokerPID > 0 && len(urls) == 1:
		return []int{cfg.brokerPID}
	}
	var pids []int
	seen := map[int]bool{}
	for _, u := range urls {
		if pid := brokerPID(u); pid > 0 && !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	return pids
}

func brokersCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if t, ok := processCPUOf(pid); ok {
			sum += t
		}
	}
	return sum
}

// partitionTally accounts for every message of a run: each index handled
// once, from the partition its key hashes to.
type partitionTally struct {
	count     int
	seen      []atomic.Bool
	dups      atomic.Int64
	misrouted atomic.Int64
	foreign   atomic.Int64 // ids past n: the untimed publishes that open the channels
	alien     atomic.Int64 // ids that are not the run's
	perQueue  []atomic.Int64
	done      *counter
}

func newPartitionTally(n, count int) *partitionTally {
	return &partitionTally{count: count, seen: make([]atomic.Bool, n), perQueue: make([]atomic.Int64, max(count, 1)), done: newCounter(n)}
}

func partitionKey(i int) string { return "k" + strconv.Itoa(i%partitionKeys) }

func (t *partitionTally) handle(_ context.Context, msg *acemq.Message) ack.Ack {
	i, err := strconv.Atoi(msg.ID())
	if err != nil || i < 0 {
		t.alien.Add(1)
		return ack.Accept()
	}
	if i >= len(t.seen) {
		t.foreign.Add(1)
		return ack.Accept()
	}
	p := msg.Partition()
	want := acemq.PartitionOf(partitionKey(i), t.count)
	if t.count > 0 && (p.Count != t.count || p.Index != want) {
		t.misrouted.Add(1)
	}
	if p.Index >= 0 && p.Index < len(t.perQueue) {
		t.perQueue[p.Index].Add(1)
	}
	if t.seen[i].Swap(true) {
		t.dups.Add(1)
		return ack.Accept()
	}
	t.done.inc()
	return ack.Accept()
}

// check reports what the accounting found wrong; missing messages are the
// counter's stall error.
func (t *partitionTally) check() error {
	var errs []error
	if d := t.dups.Load(); d > 0 {
		errs = append(errs, fmt.Errorf("%d messages handled twice", d))
	}
	if d := t.misrouted.Load(); d > 0 {
		errs = append(errs, fmt.Errorf("%d messages handled from a partition their key does not hash to", d))
	}
	if d := t.alien.Load(); d > 0 {
		errs = append(errs, fmt.Errorf("%d messages with an id that is not one of the run's", d))
	}
	return errors.Join(errs...)
}

// foreignSeen waits until the untimed publishes are handled, so that they
// are out of the way when the clock starts.
func (t *partitionTally) foreignSeen(ctx context.Context, want int) error {
	deadline := time.Now().Add(stall)
	for t.foreign.Load() < int64(want) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of the %d publishes that open the channels handled", t.foreign.Load(), want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func runPartitionLayout(ctx context.Context, e *env, urls []string, pids []int, l partitionLayout) (r partitionRun, err error) {
	name := fmt.Sprintf("%s.%s.%s", e.queue, l.queueType, variantName(l.count))
	qc := acemq.QueueConfig{Args: partitionArgs(l.queueType, len(urls) > 1), Partitions: l.count}
	queues := []string{name}
	if l.count > 0 {
		queues = acemq.Partitioned{Queue: name, Count: l.count}.Queues()
	}
	defer func() {
		for _, q := range queues {
			if derr := e.admin.deleteQueues(q); err == nil {
				err = derr
			}
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	tally := newPartitionTally(e.cfg.partitionN, l.count)
	mux := acemq.NewMux()
	mux.Use(defaultChain()...)
	mux.HandleFunc(name, tally.handle)
	var (
		servers []*acemq.Server
		closers []func() error
		ran     = make(chan error, len(urls))
	)
	defer func() { // the servers stop, then their transports close
		for _, srv := range servers {
			if serr := srv.Shutdown(context.Background()); err == nil {
				err = serr
			}
		}
		for range servers {
			if rerr := <-ran; err == nil && rerr != nil && !errors.Is(rerr, acemq.ErrServerClosed) {
				err = rerr
			}
		}
		for _, c := range closers {
			_ = c()
		}
	}()
	for i, u := range urls {
		tr, err := rabbitmq.Dial(ctx, u, rabbitmq.WithURLs(others(urls, i)...), rabbitmq.WithConnectionName("bench partitions server"))
		if err != nil {
			return r, err
		}
		closers = append(closers, tr.Close)
		srv := &acemq.Server{
			Transport: tr, Handler: mux, Prefetch: e.cfg.prefetch, Concurrency: e.cfg.workers,
			Queues: map[string]acemq.QueueConfig{name: qc},
		}
		servers = append(servers, srv)
		go func() { ran <- srv.Run(ctx) }()
	}
	if err := awaitConsumers(ctx, e.admin, queues, len(urls), ran); err != nil {
		return r, err
	}

	pubs := make([]*acemq.Publisher, e.cfg.partitionPublishers)
	for i := range pubs {
		tr, err := rabbitmq.Dial(ctx, urls[i%len(urls)], rabbitmq.WithURLs(others(urls, i%len(urls))...),
			rabbitmq.WithInFlight(e.cfg.window), rabbitmq.WithPublishChannels(e.cfg.channels),
			rabbitmq.WithConnectionName("bench partitions publisher"))
		if err != nil {
			return r, err
		}
		defer tr.Close()
		pubs[i] = &acemq.Publisher{Transport: tr, Mandatory: true}
	}
	target := acemq.Partitioned{Queue: name, Count: max(l.count, 1)}
	publish := func(ctx context.Context, p *acemq.Publisher, i int) error {
		key := name
		if l.count > 0 {
			key = target.For(partitionKey(i))
		}
		_, err := p.Publish(ctx, acemq.Outgoing{RoutingKey: key, ID: strconv.Itoa(i), Body: e.body, ContentType: "application/json"})
		return err
	}
	for i, p := range pubs { // opens every confirm channel, untimed: ids past n, not counted
		for c := range e.cfg.channels {
			if err := publish(ctx, p, e.cfg.partitionN+i*e.cfg.channels+c); err != nil {
				return r, err
			}
		}
	}
	if err := tally.foreignSeen(ctx, len(pubs)*e.cfg.channels); err != nil {
		return r, err
	}
	pubCtx, pubCancel := context.WithCancel(ctx)
	defer pubCancel()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mallocs0, bytes0 := ms.Mallocs, ms.TotalAlloc
	cpu0, bcpu0 := processCPU(), brokersCPU(pids)
	began := time.Now()
	var (
		wg       sync.WaitGroup
		pubErrs  = make([]error, len(pubs))
		lastDone atomic.Int64
	)
	// The publishers share out the indexes: publisher j takes every
	// len(pubs)-th one, from j.
	for j, p := range pubs {
		wg.Go(func() {
			share := (e.cfg.partitionN - j + len(pubs) - 1) / len(pubs)
			pubErrs[j] = publishAll(pubCtx, e.cfg.publishers, share, func(ctx context.Context, k int) error {
				return publish(ctx, p, j+k*len(pubs))
			})
			d := int64(time.Since(began))
			for old := lastDone.Load(); d > old && !lastDone.CompareAndSwap(old, d); old = lastDone.Load() {
			}
		})
	}
	waitErr := tally.done.wait(ctx, stall)
	if waitErr != nil {
		pubCancel() // the publishers still waiting
	}
	// A classic queue may deliver a message before it confirms it (the
	// confirm waits for the disk), so the last handled is not the end.
	wg.Wait()
	elapsed := time.Since(began)
	cpu, bcpu := processCPU()-cpu0, brokersCPU(pids)-bcpu0
	runtime.ReadMemStats(&ms)
	if waitErr != nil { // the publishers' errors, cancelled by it, say less
		return r, fmt.Errorf("%w (published: %v)", waitErr, firstError(pubErrs))
	}
	if err := errors.Join(pubErrs...); err != nil {
		return r, err
	}
	if err := tally.check(); err != nil {
		return r, err
	}
	r = partitionRun{
		queueType: l.queueType, count: l.count, n: e.cfg.partitionN, elapsed: elapsed, publishElapsed: time.Duration(lastDone.Load()),
		cpu: cpu, brokerCPU: bcpu, mallocs: ms.Mallocs - mallocs0, bytes: ms.TotalAlloc - bytes0,
	}
	for i := range tally.perQueue {
		r.perQueue = append(r.perQueue, int(tally.perQueue[i].Load()))
	}
	for _, q := range queues {
		if got, err := e.admin.count(q); err != nil || got != 0 {
			return r, fmt.Errorf("after the run: %d messages in %s (%v)", got, q, err)
		}
	}
	if e.cfg.partitionPlacement {
		if r.leaders, err = queueLeaders(ctx, e.cfg, queues); err != nil {
			return r, err
		}
	}
	return r, nil
}

// others are the URLs but the i-th, from the one after it: the nodes a
// transport falls back on.
func others(urls []string, i int) []string {
	var out []string
	for k := 1; k < len(urls); k++ {
		out = append(out, urls[(i+k)%len(urls)])
	}
	return out
}

// awaitConsumers waits until every queue has want consumers, so that the
// clock starts with every Server consuming; a Server that stopped fails
// the wait.
func awaitConsumers(ctx context.Context, a *admin, queues []string, want int, ran <-chan error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		ready := true
		for _, q := range queues {
			if n, err := a.consumers(q); err != nil || n < want {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		if len(ran) > 0 {
			return errors.New("a server stopped before consuming")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the queues %v did not have %d consumers each within a minute", queues, want)
		}
	}
}

// partitionsNote is the progress line's tail for a partitions run.
func partitionsNote(r result) string {
	s := ""
	for _, p := range r.partitions {
		s += fmt.Sprintf("\n    %-8s %-6s %8.0f msgs/s  publish %8.0f msgs/s  CPU µs/msg %5.1f (broker %5.1f)  per queue %v",
			p.queueType, p.variant(), p.rate(), float64(p.n)/p.publishElapsed.Seconds(),
			micros(p.cpu/time.Duration(p.n)), micros(p.brokerCPU/time.Duration(p.n)), p.perQueue)
		if len(p.leaders) > 0 {
			s += fmt.Sprintf("  leaders %v", p.leaders)
		}
	}
	return s
}

// consumers is the queue's consumer count.
func (a *admin) consumers(queue string) (int, error) {
	var n int
	err := a.with(func(ch *amqp.Channel) error {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		n = q.Consumers
		return err
	})
	return n, err
}

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
