package acemq_test

import (
	"testing"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/acemq/acemq/codec"
)

var jsonCodec = codec.JSON

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func zapString(k, v string) zap.Field { return zap.String(k, v) }
