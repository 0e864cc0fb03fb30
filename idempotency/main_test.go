package idempotency_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq/transport/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a clock tests move by hand: a memory broker's virtual one,
// as WithClock is given in a service's tests. It starts on a whole
// microsecond, PostgreSQL's resolution, so both stores see the same times.
type fakeClock = memory.Clock

func newFakeClock() *fakeClock {
	return memory.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}
