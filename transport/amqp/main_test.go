package rabbitmq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/brokertest"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		stopPrivateNode()
		os.Exit(code)
	}))
}

// brokerURL is ACEMQ_AMQP_URL. Without it the test is skipped, unless CI is
// set: under CI nothing may skip.
func brokerURL(tb testing.TB) string {
	tb.Helper()
	u := brokertest.SharedURL(tb)
	return u
}

// name returns a queue or exchange name unique to this test run.
func name(tb testing.TB, suffix string) string {
	tb.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	base := strings.NewReplacer("/", ".", " ", "_").Replace(tb.Name())
	return "acemqtest." + base + "." + hex.EncodeToString(b) + "." + suffix
}

// dial connects to the test broker with a test logger and closes the
// transport at the end of the test.
func dial(tb testing.TB, opts ...Option) *Transport {
	tb.Helper()
	return dialURL(tb, brokerURL(tb), opts...)
}

// dialURL is dial to a URL of the test's choosing.
func dialURL(tb testing.TB, url string, opts ...Option) *Transport {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts = append([]Option{
		WithLogger(zaptest.NewLogger(tb)),
		WithBackoff(50*time.Millisecond, time.Second),
		WithConnectionName("acemq-test " + tb.Name()),
	}, opts...)
	tr, err := Dial(ctx, url, opts...)
	if err != nil {
		tb.Fatalf("Dial: %v", err)
	}
	tb.Cleanup(func() {
		if err := tr.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return tr
}

// testCtx is a context that ends with the test, at most after d.
func testCtx(tb testing.TB, d time.Duration) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}
