// Package tbtest runs a test helper against a testing.TB that records how
// it failed, for the tests of the project's test kits (polltest,
// metrictest, brokertest, acemqtest): a helper's promise is also how it
// fails a test, and a real *testing.T that fails cannot be asked
// afterwards what it said.
package tbtest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// Failure calls f on a goroutine of its own with a testing.TB that records
// its failures instead of reporting them, Fatal and Fatalf ending f's
// goroutine as they end a test's; what that TB does not implement (Log,
// Name, TempDir, ...) is tb's. The cleanups f registered run, last
// registered first, before Failure returns. It returns the failures joined
// by "; ", "" when f passed.
func Failure(tb testing.TB, f func(testing.TB)) string {
	tb.Helper()
	r := &recorder{TB: tb}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.failed, "; ")
}

// recorder is the testing.TB Failure hands to f.
type recorder struct {
	testing.TB
	mu       sync.Mutex
	failed   []string
	cleanups []func()
}

func (r *recorder) Helper()                           {}
func (r *recorder) Context() context.Context          { return context.Background() }
func (r *recorder) Cleanup(f func())                  { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }

func (r *recorder) Fatal(args ...any) {
	r.fail(fmt.Sprint(args...))
	runtime.Goexit()
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fail(fmt.Sprintf(format, args...))
	runtime.Goexit()
}

func (r *recorder) fail(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = append(r.failed, msg)
}
