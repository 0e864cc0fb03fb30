// Package tbtest runs a test helper against a testing.TB that records how
// it failed, for the tests of the project's own test kit (polltest,
// metrictest, brokertest): a helper's promise is also how it fails the
// test, and a real *testing.T that fails cannot be asked afterwards what
// it said.
package tbtest

import (
	"fmt"
	"runtime"
	"testing"
)

// recorder is a testing.TB that keeps what Errorf or Fatalf said last,
// Fatalf ending its goroutine as testing.T's does, and runs its cleanups
// when the helper returns.
type recorder struct {
	testing.TB // nil: a method not written here panics, naming what the helper used
	failed     string
	cleanups   []func()
}

func (r *recorder) Helper()          {}
func (r *recorder) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recorder) Errorf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Failure calls f on a goroutine of its own with a recording testing.TB
// and returns what f failed it with, "" when it did not. The TB's cleanups
// run, last registered first, before Failure returns.
func Failure(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r.failed
}
