package rabbitmq

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/transport"
	"go.uber.org/zap"
)

// DefaultStallAfter is how long publishes may wait with no confirm at all
// before the transport calls the broker stalled (WithStallAfter). A
// healthy broker confirms in milliseconds, and a quorum queue that lost
// its leader elects another in a few seconds; a node cut off from its
// cluster's majority goes on accepting publishes it cannot confirm, and
// RabbitMQ notices the partition only after net_ticktime (60 s by
// default), or never with cluster_partition_handling = ignore. Ten
// seconds is over any election and well under both.
const DefaultStallAfter = 10 * time.Second

// stallWatch tells a broker that accepts publishes and answers none of
// them from one that is merely busy. The publish connection is stalled
// when publishes have awaited a confirm for stallAfter and none came
// meanwhile (a confirm or a nack: any answer). It stays stalled until an
// answer comes or the connection is replaced, not merely until the
// waiting publishes time out, so that a readiness probe does not flap at
// every confirm timeout.
type stallWatch struct {
	after      time.Duration // 0: never stalled
	waiting    atomic.Int64  // publishes awaiting a confirm
	busySince  atomic.Int64  // UnixNano of the first publish begun since the last answer
	lastAnswer atomic.Int64  // UnixNano of the last confirm or nack
	since      atomic.Int64  // UnixNano the stall began; 0 when not stalled
	probing    atomic.Bool   // a publish sent while stalled awaits its answer
	lastProbe  atomic.Int64  // UnixNano the last probe was sent
	gen        uint64        // the connection the stall is on (the drain loop's alone)
}

// begin counts a publish that waits for the broker from now: for a
// channel, if it needs one, and then for its confirm. The silence is
// counted from the first publish begun since the last answer, not from
// the latest: publishes that give up before the bound (a caller's short
// deadline) and are tried again are one silence, not many short ones.
func (w *stallWatch) begin(now time.Time) {
	w.waiting.Add(1)
	if w.busySince.Load() <= w.lastAnswer.Load() {
		w.busySince.Store(now.UnixNano())
	}
}

// admit says whether a publish may go to the broker now: always, unless
// the broker is stalled; then only while no other publish waits for it,
// and once per stall bound, as the probe whose answer ends the stall
// (probe true: call probed when it is done); an answer to a publish still
// waiting ends it as well. Any other is refused before it is sent, with
// an error wrapping transport.ErrStalled: sending it would only add a
// message whose outcome is unknown, to be published again and, if the
// stalled node forwards it after all, delivered twice. A producer that
// publishes a message again until it is confirmed sends it again as each
// probe. So a stall's unknown outcomes are bounded: what was in flight
// when it began, then one per stall bound (10 s by default) for as long
// as it lasts, on each connection.
func (w *stallWatch) admit(now time.Time) (probe bool, err error) {
	if w.since.Load() == 0 {
		return false, nil
	}
	if w.waiting.Load() > 0 || time.Duration(now.UnixNano()-w.lastProbe.Load()) < w.after || !w.probing.CompareAndSwap(false, true) {
		return false, w.err(now)
	}
	w.lastProbe.Store(now.UnixNano())
	return true, nil
}

// probed ends the probe admit let through.
func (w *stallWatch) probed() { w.probing.Store(false) }

// answer records that the broker answered a publish (a confirm or a nack).
func (w *stallWatch) answer(now time.Time) { w.lastAnswer.Store(now.UnixNano()) }

// end counts a publish done waiting.
func (w *stallWatch) end() { w.waiting.Add(-1) }

// stalledFor decides, from the watch's counts at now (UnixNano all),
// whether the broker is stalled, and since when it has been silent:
// publishes waiting, and no answer since the later of the last answer and
// the moment the wait began, for at least after; or a stall already
// begun (its silence since since) and no answer after it.
func stalledFor(waiting int64, busySince, lastAnswer, since, now int64, after time.Duration) (bool, int64) {
	if after <= 0 {
		return false, 0
	}
	if since != 0 {
		return lastAnswer <= since, since
	}
	if waiting <= 0 {
		return false, 0
	}
	silent := max(busySince, lastAnswer)
	return time.Duration(now-silent) >= after, silent
}

// tick re-decides the stall at now on the connection of generation gen,
// and logs its start and its end.
func (w *stallWatch) tick(now time.Time, gen uint64, log *zap.Logger) {
	since := w.since.Load()
	if since != 0 && gen != w.gen {
		w.since.Store(0) // a new connection: what stalled went with the old one
		log.Info("acemq: the stalled publish connection was replaced", zap.Stringer("stalled_for", now.Sub(time.Unix(0, since)).Round(time.Millisecond)))
		since = 0
	}
	stalled, silent := stalledFor(w.waiting.Load(), w.busySince.Load(), w.lastAnswer.Load(), since, now.UnixNano(), w.after)
	// Each change is logged before Check says so, so that whoever sees
	// Check's answer finds the line that explains it.
	switch {
	case stalled && since == 0:
		log.Warn("acemq: the broker stalled: publishes await a confirm and none came; a node cut off from its cluster's majority, or a quorum queue without a leader, accepts publishes it cannot confirm",
			zap.Int64("waiting", w.waiting.Load()), zap.Stringer("silent_for", now.Sub(time.Unix(0, silent)).Round(time.Millisecond)))
		w.gen = gen
		w.since.Store(silent)
	case !stalled && since != 0:
		log.Info("acemq: the broker answers publishes again", zap.Stringer("stalled_for", now.Sub(time.Unix(0, since)).Round(time.Millisecond)))
		w.since.Store(0)
	}
}

// err is the stall as Check reports it, or nil.
func (w *stallWatch) err(now time.Time) error {
	since := w.since.Load()
	if since == 0 {
		return nil
	}
	return fmt.Errorf("%w: no confirm for %s; publishes waiting for the broker: %d", transport.ErrStalled,
		now.Sub(time.Unix(0, since)).Round(time.Second), w.waiting.Load())
}
