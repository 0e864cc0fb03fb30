package soak_test

import (
	"flag"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The soak's flags: a failure prints its seed, and -soak.seed replays the
// same schedule; -soak.duration runs as long a stretch of simulated time as
// asked (168h is a week).
var (
	seedFlag     = flag.Uint64("soak.seed", 0, "the soak schedule's seed; 0 picks one from the wall clock (printed)")
	durationFlag = flag.Duration("soak.duration", 48*time.Hour, "simulated time the soak runs for")
	intervalFlag = flag.Duration("soak.interval", 20*time.Second, "mean simulated time between two publishes")
	faultFlag    = flag.Duration("soak.fault-every", 6*time.Minute, "mean simulated time between two injected faults")
	withoutFlag  = flag.String("soak.without", "", "fault kinds to leave out, comma-separated (to narrow a failure down)")
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
