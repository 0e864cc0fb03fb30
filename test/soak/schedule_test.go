package soak_test

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// schedule is the soak's seeded schedule, apart from any transport: the
// publishes (id, queue, the handler's script) and the faults (kind, and
// what each takes: how many publishes, which queue) in the order and at
// the simulated times a seed gives. TestSoak plays it on the memory
// transport's virtual clock, TestSoakRabbitMQ on a real broker with the
// times compressed; both draw every value the same way, so a seed is one
// story on both, and a kind one transport cannot take is still drawn
// (and not done) so that what follows it stays the same.
type schedule struct {
	r                  *rand.Rand
	end                time.Time
	nextPub, nextFault time.Time
	seq                int
}

// step is one thing the schedule does: a publish when fault is "",
// otherwise a fault ("none" for a kind left out by -soak.without).
type step struct {
	at time.Time

	id, queue string
	script    script

	fault  string
	n      int    // nack, unconfirmed, dropped, blocked: the publishes it takes
	target string // consumers-cancelled, queue-deleted: the queue
}

func newSchedule(seed uint64, start time.Time, d time.Duration) *schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := &schedule{r: r, end: start.Add(d)}
	s.nextPub = start.Add(exp(r, *intervalFlag))
	s.nextFault = start.Add(exp(r, *faultFlag))
	return s
}

// next returns the schedule's next step, false once it is past its end.
func (s *schedule) next() (step, bool) {
	r := s.r
	at := s.nextPub
	if s.nextFault.Before(at) {
		at = s.nextFault
	}
	if at.After(s.end) {
		return step{}, false
	}
	if at.Equal(s.nextPub) {
		s.seq++
		st := step{at: at, id: fmt.Sprintf("soak-%06d", s.seq), queue: workQueues[r.IntN(len(workQueues))]}
		st.script = drawScript(r)
		s.nextPub = at.Add(max(exp(r, *intervalFlag), time.Millisecond))
		return st, true
	}
	st := step{at: at, fault: drawFault(r)}
	switch st.fault {
	case "nack", "unconfirmed", "dropped":
		st.n = 1 + r.IntN(3)
	case "blocked":
		st.n = 1 + r.IntN(5)
	case "consumers-cancelled", "queue-deleted":
		st.target = workQueues[r.IntN(len(workQueues))]
	}
	s.nextFault = at.Add(max(exp(r, *faultFlag), time.Millisecond))
	return st, true
}
