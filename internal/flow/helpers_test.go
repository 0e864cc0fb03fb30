package flow_test

import (
	"math"
	"time"
)

func nan() float64 { return math.NaN() }

// wallClock is the wall clock as a transport.Clock, for the benchmarks.
type wallClock struct{}

func (wallClock) Now() time.Time                         { return time.Now() }
func (wallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
