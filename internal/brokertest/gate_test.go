package brokertest_test

import (
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/tbtest"
)

// Optional leaves a missing service out only outside CI.
func TestOptional(t *testing.T) {
	t.Setenv("ACEMQ_BROKERTEST_OPTIONAL", "")
	t.Setenv("CI", "")
	if got := tbtest.Failure(t, func(tb testing.TB) {
		if v := brokertest.Optional(tb, "ACEMQ_BROKERTEST_OPTIONAL"); v != "" {
			tb.Errorf("Optional = %q, want \"\"", v)
		}
	}); got != "" {
		t.Errorf("Optional of an unset variable outside CI failed: %s", got)
	}
	t.Setenv("CI", "true")
	if got := tbtest.Failure(t, func(tb testing.TB) { brokertest.Optional(tb, "ACEMQ_BROKERTEST_OPTIONAL") }); !strings.Contains(got, "CI is set but ACEMQ_BROKERTEST_OPTIONAL is not") {
		t.Errorf("Optional of an unset variable under CI failed with %q, want it to say CI needs it", got)
	}
	t.Setenv("ACEMQ_BROKERTEST_OPTIONAL", "amqp://localhost")
	if got := brokertest.Optional(t, "ACEMQ_BROKERTEST_OPTIONAL"); got != "amqp://localhost" {
		t.Errorf("Optional = %q, want the variable", got)
	}
}

// OnEachBroker runs on the memory transport first, and on RabbitMQ only
// when it is given.
func TestOnEachBroker(t *testing.T) {
	t.Setenv("CI", "")
	for _, url := range []string{"", "amqp://guest@127.0.0.1:1/"} {
		t.Run("given "+url, func(t *testing.T) {
			t.Setenv("ACEMQ_AMQP_URL", url)
			var ran []string
			parent := t.Name() + "/"
			brokertest.OnEachBroker(t, func(t *testing.T, url string) { ran = append(ran, strings.TrimPrefix(t.Name(), parent)+" "+url) })
			want := []string{"memory "}
			if url != "" {
				want = append(want, "rabbitmq "+url)
			}
			if strings.Join(ran, ", ") != strings.Join(want, ", ") {
				t.Errorf("ran %q, want %q", ran, want)
			}
		})
	}
}
