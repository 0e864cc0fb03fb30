package acemqtest_test

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
