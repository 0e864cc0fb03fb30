package amqplimit

import (
	"testing"

	"go.uber.org/goleak"
)

// The fake broker's goroutines, and amqp091-go's on its connections, end
// with each test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
