package acemq_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/acemq/acemq/codec"
)

var jsonCodec = codec.JSON

func attributeKey(k string) attribute.Key { return attribute.Key(k) }

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func zapString(k, v string) zap.Field { return zap.String(k, v) }
