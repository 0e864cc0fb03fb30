package rabbitmq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/polltest"
	"github.com/acemq/acemq/transport"
	amqp "github.com/rabbitmq/amqp091-go"
)

// tagBroker is a consume channel as RabbitMQ keeps it: the unsettled
// delivery tags, and the rule that an ack or reject naming a tag that is
// not unsettled is a channel error ("unknown delivery tag"), multiple or
// not.
type tagBroker struct {
	mu       sync.Mutex
	open     map[uint64]bool
	outcome  map[uint64]string // "ack", "requeue", "drop"
	frames   []string
	protoErr error
	closed   bool
}

func newTagBroker(n int) *tagBroker {
	b := &tagBroker{open: map[uint64]bool{}, outcome: map[uint64]string{}}
	for tag := uint64(1); tag <= uint64(n); tag++ {
		b.open[tag] = true
	}
	return b
}

func (b *tagBroker) Ack(tag uint64, multiple bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(tag); err != nil {
		return err
	}
	b.frames = append(b.frames, fmt.Sprintf("ack %d multiple=%t", tag, multiple))
	for t := range b.open {
		if t == tag || (multiple && t < tag) {
			delete(b.open, t)
			b.outcome[t] = "ack"
		}
	}
	return nil
}

func (b *tagBroker) Reject(tag uint64, requeue bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(tag); err != nil {
		return err
	}
	b.frames = append(b.frames, fmt.Sprintf("reject %d requeue=%t", tag, requeue))
	delete(b.open, tag)
	b.outcome[tag] = map[bool]string{true: "requeue", false: "drop"}[requeue]
	return nil
}

func (b *tagBroker) Nack(tag uint64, multiple, requeue bool) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.check(tag); err != nil {
		return err
	}
	if multiple {
		return errors.New("tagBroker: a multiple nack")
	}
	b.frames = append(b.frames, fmt.Sprintf("nack %d requeue=%t", tag, requeue))
	delete(b.open, tag)
	b.outcome[tag] = map[bool]string{true: "requeue", false: "drop"}[requeue]
	return nil
}

func (b *tagBroker) check(tag uint64) error {
	if b.closed {
		return amqp.ErrClosed
	}
	if !b.open[tag] {
		b.closed = true
		b.protoErr = fmt.Errorf("PRECONDITION_FAILED - unknown delivery tag %d", tag)
		return b.protoErr
	}
	return nil
}

func (b *tagBroker) sentFrames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.frames)
}

// held is a ledger whose acks never linger out: what it sends is decided
// by settlements alone.
func held(b *tagBroker, prefetch int) *ackLedger {
	l := newAckLedger(b, prefetch)
	l.linger = time.Hour
	return l
}

func TestAckLedgerFrames(t *testing.T) {
	type step struct {
		tag     uint64
		reject  bool
		requeue bool
	}
	acks := func(tags ...uint64) []step {
		s := make([]step, len(tags))
		for i, tag := range tags {
			s[i] = step{tag: tag}
		}
		return s
	}
	tests := []struct {
		name     string
		prefetch int
		steps    []step
		want     []string // sent by the steps
		flushed  []string // then sent by the flush
	}{
		{"acks wait for each other", 100, acks(1, 2, 3), nil, []string{"ack 3 multiple=true"}},
		{"behind the head, then the head", 100, acks(2, 3, 4, 1), nil, []string{"ack 4 multiple=true"}},
		{"a quarter of the prefetch goes at once", 12, acks(1, 2, 3, 4), []string{"ack 3 multiple=true"}, []string{"ack 4 multiple=true"}},
		{"the run stops at a gap", 100, acks(2, 4, 1), nil, []string{"ack 2 multiple=true", "ack 4 multiple=false"}},
		{"a reject goes alone, at once, and first", 100,
			[]step{{tag: 2}, {tag: 3, reject: true}, {tag: 4}, {tag: 1}},
			[]string{"reject 3 requeue=false"}, []string{"ack 4 multiple=true"}},
		{"a requeue goes alone", 100,
			[]step{{tag: 1, reject: true, requeue: true}, {tag: 2}},
			[]string{"nack 1 requeue=true"}, []string{"ack 2 multiple=true"}},
		{"three quarters of the prefetch behind the head go alone", 8, acks(2, 3, 4, 5, 6, 7, 1),
			[]string{"ack 2 multiple=false", "ack 3 multiple=false", "ack 4 multiple=false", "ack 5 multiple=false", "ack 6 multiple=false", "ack 7 multiple=false"},
			[]string{"ack 1 multiple=true"}},
		{"the head goes at a quarter, what waits behind the gap stays", 12, acks(1, 2, 4, 5),
			[]string{"ack 2 multiple=true"}, []string{"ack 4 multiple=false", "ack 5 multiple=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newTagBroker(10)
			l := held(b, tt.prefetch)
			for _, s := range tt.steps {
				var err error
				if s.reject {
					err = l.reject(s.tag, s.requeue)
				} else {
					err = l.ack(s.tag)
				}
				if err != nil {
					t.Fatalf("settle %d: %v", s.tag, err)
				}
			}
			if got := b.sentFrames(); !slices.Equal(got, tt.want) {
				t.Fatalf("frames\n got %q\nwant %q", got, tt.want)
			}
			l.flush()
			if got := b.sentFrames()[len(tt.want):]; !slices.Equal(got, tt.flushed) {
				t.Fatalf("frames of the flush\n got %q\nwant %q", got, tt.flushed)
			}
			if b.protoErr != nil {
				t.Fatal(b.protoErr)
			}
		})
	}
}

// TestAckLedgerLingers: acks wait at most the linger for others, without
// any other settlement to carry them: behind a delivery that stays
// unsettled (an in-process retry wait) they go alone, and the head's go in
// one multiple-ack once it settles.
func TestAckLedgerLingers(t *testing.T) {
	b := newTagBroker(3)
	l := newAckLedger(b, 100)
	l.linger = 5 * time.Millisecond
	defer l.close()
	for _, tag := range []uint64{2, 3} {
		if err := l.ack(tag); err != nil {
			t.Fatal(err)
		}
	}
	waitFrames := func(n int) []string {
		polltest.Until(polltest.Generous, func() bool { return len(b.sentFrames()) >= n })
		return b.sentFrames()
	}
	want := []string{"ack 2 multiple=false", "ack 3 multiple=false"}
	if got := waitFrames(2); !slices.Equal(got, want) {
		t.Fatalf("frames\n got %q\nwant %q", got, want)
	}
	b.mu.Lock()
	headOpen := b.open[1]
	b.mu.Unlock()
	if !headOpen {
		t.Fatal("the unsettled head was settled")
	}
	if err := l.ack(1); err != nil {
		t.Fatal(err)
	}
	want = append(want, "ack 1 multiple=true")
	if got := waitFrames(3); !slices.Equal(got, want) {
		t.Fatalf("frames\n got %q\nwant %q", got, want)
	}
}

// TestAckLedgerFlush: closing the channel sends the acks still waiting,
// and leaves the unsettled for the broker to requeue. Later settlements
// are stale.
func TestAckLedgerFlush(t *testing.T) {
	b := newTagBroker(4)
	l := held(b, 100)
	for _, tag := range []uint64{2, 4} {
		if err := l.ack(tag); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.sentFrames(); len(got) != 0 {
		t.Fatalf("sent before the flush: %q", got)
	}
	l.flush()
	want := []string{"ack 2 multiple=false", "ack 4 multiple=false"}
	if got := b.sentFrames(); !slices.Equal(got, want) {
		t.Fatalf("frames\n got %q\nwant %q", got, want)
	}
	if err := l.ack(1); !errors.Is(err, transport.ErrStaleDelivery) {
		t.Fatalf("ack after flush: %v, want ErrStaleDelivery", err)
	}
}

// TestAckLedgerConcurrent settles deliveries from many goroutines in a
// random order, as workers do: the broker must see every delivery settled
// exactly as its worker asked, with no frame naming an unknown tag, and in
// fewer frames than deliveries. In odd rounds the first delivery is held
// to the end, as a message waiting in the process is, and every other ack
// has to go past it, alone.
func TestAckLedgerConcurrent(t *testing.T) {
	for round := range 20 {
		const n, workers = 2000, 8
		b := newTagBroker(n)
		l := newAckLedger(b, 100)
		want := map[uint64]string{}
		tags := make(chan uint64)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for tag := range tags {
					var outcome string
					var err error
					switch x := r.IntN(20); {
					case x == 0:
						outcome, err = "requeue", l.reject(tag, true)
					case x == 1:
						outcome, err = "drop", l.reject(tag, false)
					default:
						outcome, err = "ack", l.ack(tag)
					}
					if err != nil {
						t.Errorf("settle %d: %v", tag, err)
					}
					mu.Lock()
					want[tag] = outcome
					mu.Unlock()
				}
			}()
		}
		first := uint64(1)
		if round%2 == 1 {
			first = 2
		}
		for tag := first; tag <= n; tag++ {
			tags <- tag
		}
		close(tags)
		wg.Wait()
		if first == 2 {
			if err := l.ack(1); err != nil {
				t.Fatal(err)
			}
			want[1] = "ack"
		}
		l.flush()
		if b.protoErr != nil {
			t.Fatalf("round %d: %v", round, b.protoErr)
		}
		if len(b.open) != 0 {
			t.Fatalf("round %d: %d deliveries left unsettled", round, len(b.open))
		}
		for tag, w := range want {
			if b.outcome[tag] != w {
				t.Fatalf("round %d: tag %d settled %q, want %q", round, tag, b.outcome[tag], w)
			}
		}
		if round == 0 {
			t.Logf("%d frames for %d deliveries", len(b.frames), n)
		}
		if f := len(b.frames); first == 1 && f >= n {
			t.Fatalf("round %d: %d frames for %d deliveries: nothing coalesced", round, f, n)
		}
	}
}

// nopChannel accepts every frame.
type nopChannel struct{}

func (nopChannel) Ack(uint64, bool) error        { return nil }
func (nopChannel) Nack(uint64, bool, bool) error { return nil }
func (nopChannel) Reject(uint64, bool) error     { return nil }

// BenchmarkAckLedger is the ledger's cost per ack: in delivery order, and
// behind a delivery held for the whole run (its cost must not grow with
// what was delivered since).
func BenchmarkAckLedger(b *testing.B) {
	for _, held := range []bool{false, true} {
		name := map[bool]string{false: "in-order", true: "held-head"}[held]
		b.Run(name, func(b *testing.B) {
			l := newAckLedger(nopChannel{}, 100)
			defer l.close()
			tag := uint64(1)
			if held {
				tag = 2
			}
			for b.Loop() {
				_ = l.ack(tag)
				tag++
			}
		})
	}
}
