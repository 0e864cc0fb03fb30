// Package panicked is what a recovered panic in a handler says, the one
// wording for every place the library recovers one: the server's safety
// net (internal/engine), middleware.Recover and acemqtest.Serve. A panic
// is a retry there, so the queue's retry policy decides what follows, and
// an operator reads the same reason whichever recovered it.
package panicked

import (
	"fmt"

	"github.com/acemq/acemq/ack"
)

// Text is what a panic with value v says.
func Text(v any) string { return fmt.Sprintf("acemq: handler panicked: %v", v) }

// Retry is the answer a recovered panic with value v becomes.
func Retry(v any) ack.Ack { return ack.Retry(fmt.Errorf("%s", Text(v))) }
