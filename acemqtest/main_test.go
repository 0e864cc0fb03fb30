package acemqtest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// failures runs f with a testing.TB that records its first failure, as a
// test of what acemqtest fails a test for: Fatal ends f's goroutine as it
// ends a test's. The cleanups f registered run before it returns. It
// returns the failure, "" when f passed.
func failures(t *testing.T, f func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r.failure()
}

// recorder is a testing.TB whose failures are recorded, not reported; what
// it does not implement is t's.
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

func (r *recorder) failure() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.failed, "; ")
}

// exampleT stands in, in the Examples, for the *testing.T a test function
// is given: a failure panics, the log is dropped, and end runs the
// cleanups as the end of a test would.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func newExampleT() *exampleT { return &exampleT{} }

func (e *exampleT) Helper()                   {}
func (e *exampleT) Context() context.Context  { return context.Background() }
func (e *exampleT) Cleanup(f func())          { e.cleanups = append(e.cleanups, f) }
func (e *exampleT) Log(...any)                {}
func (e *exampleT) Logf(string, ...any)       {}
func (e *exampleT) Error(args ...any)         { panic(fmt.Sprint(args...)) }
func (e *exampleT) Errorf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }
func (e *exampleT) Fatal(args ...any)         { panic(fmt.Sprint(args...)) }
func (e *exampleT) Fatalf(f string, a ...any) { panic(fmt.Sprintf(f, a...)) }

func (e *exampleT) end() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
}
